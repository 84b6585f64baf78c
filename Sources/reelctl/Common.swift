import ArgumentParser
import ReelCommandLine
import Foundation
import ReelControl
import ReelCore

/// Options every subcommand accepts, before or after its name.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Path of reeld's control socket (default: $\(SocketPath.environmentVariable), else \(SocketPath.defaultPath)).",
        valueName: "path"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp(
        "Seconds to wait for reeld's reply (default: 60 for stop, 15 otherwise); a pause, resume or undo not carried out by then is cancelled.",
        valueName: "seconds"))
    var timeout: Int?

    func validate() throws {
        if let timeout, timeout <= 0 { throw ValidationError("--timeout must be a positive number of seconds") }
    }
}

func printError(_ message: String) { printError("reelctl", message) }

/// The part of reeld's reply a command prints (`what` names it); without it (a reeld of another
/// version) the command says so and exits as refused.
func required<T>(_ value: T?, in command: Command, _ what: String) throws -> T {
    guard let value else {
        printError("reeld replied to '\(command.rawValue)' without \(what) (is reeld the same version as reelctl?)")
        throw ExitCode(ExitStatus.refused)
    }
    return value
}

/// Sends one request and returns the successful reply; on any failure prints the reason and
/// exits 1 (refused by reeld) or 2 (could not talk to reeld).
func perform(_ cmd: Command, name: String? = nil, args: [String: CameraControlInput]? = nil, label: String? = nil,
             maxDurationNs: Nanos? = nil, width: Int? = nil, take: Int? = nil, reset: ControlReset? = nil, options: GlobalOptions,
             defaultTimeoutSeconds: Int = 15, preRollNs: Nanos? = nil) throws -> Reply {
    let path = SocketPath.resolve(explicit: options.socket, environment: ProcessInfo.processInfo.environment)
    let timeoutMs = (options.timeout ?? defaultTimeoutSeconds) * 1000
    let reply: Reply
    do {
        let client = try ControlClient(path: path)
        reply = try client.send(Request(id: 1, cmd: cmd, name: name, args: args, label: label, maxDurationNs: maxDurationNs, width: width,
                                           take: take, reset: reset, timeoutMs: timeoutMs, preRollNs: preRollNs), timeoutMs: timeoutMs)
    } catch {
        printError("\(error)")
        throw ExitCode(ExitStatus.usage)
    }
    guard reply.ok else {
        let message = reply.error?.message ?? "reeld refused '\(cmd.rawValue)' without saying why"
        printError(message)
        throw ExitCode(ExitStatus.refused)
    }
    return reply
}

/// The file a successful `start` or `stop` reply must carry.
func requireFile(_ reply: Reply, _ cmd: Command) throws -> String {
    guard let file = reply.file else {
        printError("reeld accepted '\(cmd.rawValue)' but did not say which file (is reeld the same version as reelctl?)")
        throw ExitCode(ExitStatus.refused)
    }
    return file
}

/// `--label`'s check: the protocol's rule, naming the option.
func validateLabel(_ label: String?) throws {
    if let label, let problem = Wire.labelProblem(label) {
        throw ValidationError(problem.replacingOccurrences(of: "\"label\"", with: "--label"))
    }
}
