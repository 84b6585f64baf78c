import ArgumentParser
import ReelCommandLine
import Foundation
import ReelControl

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print reeld's events (state changes, segments, takes kept, the length cap reached, finished files, errors) as JSON lines as they happen.",
        discussion: """
            One JSON object per line: first reeld's confirmation {"v":1,"id":1,"ok":true,"subscribed":true} \
            (from then on no event is missed), then one line per event, e.g. \
            {"v":1,"event":"state","state":"recording","file":"...","at":123}; see docs/PROTOCOL.md. Runs until interrupted (Ctrl-C: exit status 0) or until reeld \
            closes the stream (it shut down, or this reader fell behind and got an "overflow" \
            event): exit status 2.
            """)

    @OptionGroup var global: GlobalOptions

    func run() throws {
        exitOnInterrupt()
        let client = try connect(global)
        let reply: Reply
        do {
            reply = try client.subscribe(timeoutMs: (global.timeout ?? 15) * 1000)
        } catch {
            printError("\(error)")
            throw ExitCode(ExitStatus.usage)
        }
        guard reply.ok, reply.subscribed == true else {
            printError(reply.error?.message ?? "reeld did not start an event stream (is reeld the same version as reelctl?)")
            throw ExitCode(ExitStatus.refused)
        }
        // The confirmation first: once it is printed, no later event is missed.
        print((try? Wire.text(reply)) ?? #"{"v":1,"ok":true,"subscribed":true}"#)
        fflush(nil)  // all streams: stdout is block-buffered into a pipe
        var overflowed = false
        while true {
            let line: [UInt8]
            do {
                line = try client.nextLine(timeoutMs: nil)
            } catch {
                if overflowed {
                    printError("reeld dropped this event stream: reelctl fell behind (is its output blocked?)")
                } else {
                    printError("reeld closed the event stream on \(client.path) (did it stop? see 'journalctl -u reeld')")
                }
                throw ExitCode(ExitStatus.usage)
            }
            let text = String(decoding: line, as: UTF8.self)
            if text.contains("\"event\":\"overflow\"") { overflowed = true }
            print(text)
            fflush(nil)  // all streams: stdout is block-buffered into a pipe
        }
    }
}
