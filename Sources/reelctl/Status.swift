import ArgumentParser
import ReelCommandLine
import Foundation
import Glibc
import ReelControl
import ReelSystem

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the recorder's state, file, segments and counters (or a live view with --watch).",
        discussion: """
            With --watch, reelctl redraws one screen every interval: state, elapsed time, segments, \
            frames, fps, dropped frames, the audio peak per channel over the last second (dBFS), \
            bitrate (file growth), bytes written and free space. When stdout is not a terminal it \
            prints one block per interval, separated by a blank line (with --json: one status object \
            per line). Ctrl-C ends it (exit status 0); if reeld goes away it exits 2.
            """)

    @Flag(name: .long, help: "Print the status as one JSON object (the protocol's status object) instead.")
    var json = false

    @Flag(name: .long, help: "Keep asking and redraw the status every interval until interrupted.")
    var watch = false

    @Option(name: .long, help: ArgumentHelp("With --watch: seconds between redraws (default: 1).", valueName: "seconds"))
    var interval: Double?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let interval {
            guard watch else { throw ValidationError("--interval needs --watch") }
            guard interval.isFinite, interval >= 0.01, interval <= 3600 else {
                throw ValidationError("--interval must be between 0.01 and 3600 seconds")
            }
        }
    }

    func run() throws {
        if watch { return try runWatch() }
        let status = try required(perform(.status, options: global).status, in: .status, "a status")
        if json {
            print(try Wire.text(status))
        } else {
            print(StatusText.render(status), terminator: "")
        }
    }

    private func runWatch() throws {
        let intervalNs = Int64(((interval ?? 1) * 1e9).rounded())
        let timeoutMs = (global.timeout ?? 15) * 1000
        let tty = isatty(STDOUT_FILENO) != 0
        exitOnInterrupt()
        var client = try connect(global)
        // Rates are taken over at least a second where possible (the file grows by whole fragments).
        var history: [WatchScreen.Sample] = []
        var next = monotonicNs()
        while true {
            let reply: Reply
            do {
                reply = try client.send(Request(id: 1, cmd: .status), timeoutMs: timeoutMs)
            } catch {
                // reeld closes a connection idle for 30 s (an --interval that long), and a
                // restarted reeld has forgotten it: connect again, once (status is safe to repeat).
                do {
                    client = try ControlClient(path: client.path)
                    reply = try client.send(Request(id: 1, cmd: .status), timeoutMs: timeoutMs)
                } catch {
                    printError("lost reeld: \(error)")
                    throw ExitCode(ExitStatus.usage)
                }
            }
            guard reply.ok, let status = reply.status else {
                printError(reply.error?.message ?? "reeld replied to 'status' without a status (is reeld the same version as reelctl?)")
                throw ExitCode(ExitStatus.refused)
            }
            let sample = WatchScreen.Sample(status: status, at: monotonicNs())
            let reference = history.last { sample.at - $0.at >= 1_000_000_000 } ?? history.first
            if json {
                print(try Wire.text(status))
            } else if tty {
                let secs = Double(intervalNs) / 1e9
                print("\u{1B}[H\u{1B}[2J" + "reelctl status --watch: every \(secs) s, Ctrl-C to quit\n\n"
                      + WatchScreen.render(reference, sample), terminator: "")
            } else {
                if !history.isEmpty { print("") }
                print(WatchScreen.render(reference, sample), terminator: "")
            }
            fflush(nil)  // all streams: stdout is block-buffered into a pipe
            history.append(sample)
            history.removeAll { sample.at - $0.at > 2_000_000_000 }
            next += intervalNs
            let now = monotonicNs()
            if next < now { next = now }  // fell behind (slow reply): no burst of redraws
            sleepUntil(next)
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
func monotonicNs() -> Int64 {
    var ts = timespec()
    // Unsafe: clock_gettime fills the local timespec. CLOCK_MONOTONIC cannot fail.
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// Sleeps until the CLOCK_MONOTONIC instant `t` (the redraw interval, not synchronisation).
func sleepUntil(_ t: Int64) { SystemClock.sleep(until: t) }

/// Ctrl-C (SIGINT) ends a watching command with exit status 0, after a newline on a terminal.
func exitOnInterrupt() {
    signal(SIGINT) { _ in
        // Unsafe: write(2) of a one-byte string literal; async-signal-safe, like _exit.
        if isatty(STDOUT_FILENO) != 0 { _ = write(STDOUT_FILENO, "\n", 1) }
        _exit(0)
    }
}

/// A connection to reeld, or exit 2 with the reason.
func connect(_ options: GlobalOptions) throws -> ControlClient {
    let path = SocketPath.resolve(explicit: options.socket, environment: ProcessInfo.processInfo.environment)
    do {
        return try ControlClient(path: path)
    } catch {
        printError("\(error)")
        throw ExitCode(ExitStatus.usage)
    }
}
