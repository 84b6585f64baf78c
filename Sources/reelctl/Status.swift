import ArgumentParser
import ReelControl

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the recorder's state, file, segments and counters.")

    @Flag(name: .long, help: "Print the status as one JSON object (the protocol's status object) instead.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let reply = try perform(.status, options: global)
        guard let status = reply.status else {
            printError("reeld replied to 'status' without a status (is reeld the same version as reelctl?)")
            throw ExitCode(ExitStatus.refused)
        }
        if json {
            print(try Wire.text(status))
        } else {
            print(StatusText.render(status), terminator: "")
        }
    }
}
