import ArgumentParser
import Foundation

/// Exit statuses of Reel's command-line programs (reelctl, reel-verify, reel-button).
public enum ExitStatus {
    /// reeld refused the command (reelctl); defects found (reel-verify).
    public static let refused: Int32 = 1
    /// Usage errors; reeld or the file could not be reached or read.
    public static let usage: Int32 = 2
}

/// Writes "PROGRAM: message" on stderr, one line.
public func printError(_ program: String, _ message: String) {
    FileHandle.standardError.write(Data("\(program): \(message)\n".utf8))
}

extension ParsableCommand {
    /// Like ParsableCommand's `main`, but a usage error exits 2 (not 64) with a "`program`: "
    /// message; `--help` and an `ExitCode` the command threw (it reported its own error) exit as
    /// they are. The one main of reelctl, reel-verify and reel-button.
    public static func mainExitingTwoOnUsage(program: String) -> Never {
        do {
            var command = try parseAsRoot()
            try command.run()
            exit()
        } catch let error as ExitCode {
            exit(withError: error)
        } catch {
            if exitCode(for: error) == .success { exit(withError: error) }  // --help
            var message = fullMessage(for: error)
            if message.hasPrefix("Error: ") { message.removeFirst("Error: ".count) }
            printError(program, message.trimmingCharacters(in: .whitespacesAndNewlines))
            Foundation.exit(ExitStatus.usage)
        }
    }
}
