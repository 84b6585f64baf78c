import ArgumentParser
import Foundation
import ReelCommandLine
import ReelControl

@main
struct Reelctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reelctl",
        abstract: "Control reeld, the Reel recorder daemon: start, pause, resume, undo, stop, status (--watch), takes, events, devices, controls, set, snapshot, preview, levels.",
        discussion: """
            reelctl talks to reeld over its control socket. The socket is, in order of precedence: \
            the --socket option, the \(SocketPath.environmentVariable) environment variable, \
            or \(SocketPath.defaultPath).

            Exit status: 0 on success; 1 when reeld refused the command (for example pausing \
            while not recording); 2 when reeld could not be reached or answered nothing usable, \
            and for usage errors.
            """,
        subcommands: [Start.self, Pause.self, Resume.self, Undo.self, Stop.self, Status.self, Takes.self, Events.self, Devices.self, Controls.self, SetControls.self, Snapshot.self, Preview.self, Levels.self, Verify.self]
    )

    @OptionGroup var global: GlobalOptions

    /// Like ParsableCommand's main, but usage errors exit 2 (not 64) with a `reelctl: ` message.
    static func main() {
        // 'reelctl verify' hands all of its arguments, --help included, to reel-verify.
        let args = CommandLine.arguments.dropFirst()
        if args.first == "verify" { VerifyTool.run(Array(args.dropFirst())) }
        mainExitingTwoOnUsage(program: "reelctl")
    }

    func run() throws {
        throw ValidationError("missing command: one of start, pause, resume, undo, stop, status, takes, events, devices, controls, set, snapshot, preview, levels, verify")
    }
}
