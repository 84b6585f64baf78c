import ArgumentParser
import ReelCommandLine
import Foundation
import ReelControl
import ReelSystem

/// Subscribes with `request` and returns the stream, or exits: 2 when reeld cannot be reached,
/// 1 when it refuses (out of range, `busy`).
private func openStream(_ request: Request, _ global: GlobalOptions) throws -> (ControlClient, Reply) {
    let client = try connect(global)
    let reply: Reply
    do {
        reply = try client.send(request, timeoutMs: (global.timeout ?? 15) * 1000)
    } catch {
        printError("\(error)")
        throw ExitCode(ExitStatus.usage)
    }
    guard reply.ok, reply.subscribed == true else {
        printError(reply.error?.message ?? "reeld did not start a '\(request.cmd.rawValue)' stream (is reeld the same version as reelctl?)")
        throw ExitCode(ExitStatus.refused)
    }
    return (client, reply)
}

/// The next line of a stream, or exit 2 (reeld closed it, or nothing came for `seconds`).
private func nextLine(_ client: ControlClient, seconds: Int, waitingFor what: String) throws -> [UInt8] {
    do {
        return try client.nextLine(timeoutMs: seconds * 1000)
    } catch let error as SocketError where error.kind == .timedOut {
        printError("no \(what) from reeld within \(seconds) s (see 'reelctl status'; --timeout waits longer)")
        throw ExitCode(ExitStatus.usage)
    } catch {
        printError("reeld closed the stream on \(client.path) (did it stop? see 'journalctl -u reeld')")
        throw ExitCode(ExitStatus.usage)
    }
}

struct Preview: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Save frames of the live camera preview as JPEG files (while recording, paused, or idle with standby).",
        discussion: """
            Subscribes to reeld's preview stream and writes COUNT frames into DIR as \
            frame-SEQ.jpg (new files; never over a file or through a link), printing one line per \
            frame: its path, size, capture instant (CLOCK_MONOTONIC ns on reeld's host) and the \
            frames this reader missed before it. While no camera is open reeld says why; that is \
            printed on stderr and reelctl keeps waiting (at most --timeout seconds per frame, 15 by default).
            """)

    @Option(name: .long, help: ArgumentHelp("Directory to write the frames into (it must exist).", valueName: "dir"))
    var out: String

    @Option(name: .long, help: ArgumentHelp("How many frames to save.", valueName: "n"))
    var count: Int

    @Option(name: .long, help: ArgumentHelp("Frame width in pixels (default 640; at most the camera's and preview_max_width).", valueName: "pixels"))
    var width: Int?

    @Option(name: .long, help: ArgumentHelp("Frames a second (default 10; at most the camera's and preview_max_fps).", valueName: "n"))
    var fps: Int?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if count < 1 { throw ValidationError("--count must be at least 1") }
        if let width, width < 16 { throw ValidationError("--width must be at least 16 pixels") }
        if let fps, fps < 1 { throw ValidationError("--fps must be at least 1") }
    }

    func run() throws {
        let (client, reply) = try openStream(Request(id: 1, cmd: .preview, width: width, fps: fps), global)
        if let p = reply.preview { printError("preview: \(p.width)x\(p.height) at \(p.fps) fps") }
        var saved = 0
        while saved < count {
            let raw = try nextLine(client, seconds: global.timeout ?? 15, waitingFor: "preview frame")
            guard let line = try? JSONDecoder().decode(LiveLine.self, from: Data(raw)) else { continue }
            if line.event == LiveLine.Kind.previewState {
                printError(line.live == true ? "preview: live" : "preview: not live: \(line.reason ?? "no camera is open")")
                continue
            }
            guard line.event == LiveLine.Kind.preview, let jpeg = line.jpegBytes, let seq = line.seq else { continue }
            let path = "\(out)/frame-\(seq).jpg"
            if let f = jpeg.withUnsafeBytes({ Sys.writeFile(path, $0) }) {
                printError(f.created || f.errno != EEXIST ? "cannot write \(path): \(Errno.text(f.errno)) (choose another --out DIR)"
                           : Sys.createFailure(path, errno: f.errno, fix: "reelctl never writes over a file; choose an empty --out DIR"))
                throw ExitCode(ExitStatus.refused)
            }
            print("\(path) \(line.width ?? 0)x\(line.height ?? 0) capturedNs=\(line.capturedNs ?? 0) dropped=\(line.dropped ?? 0)")
            fflush(nil)
            saved += 1
        }
    }
}

struct Levels: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the microphone's levels (peak and RMS per channel, dBFS, every 50 ms of audio) as JSON lines.",
        discussion: """
            One line per 50 ms window while the microphone is open (recording, paused, or idle with \
            standby), e.g. {"v":1,"event":"levels","peakDbfs":[-6.0],"rmsDbfs":[-9.0],"capturedNs":...,"at":...}; \
            -120.0 is digital silence. A slow reader gets the newest window. Stops after --count lines \
            (default: until interrupted).
            """)

    @Option(name: .long, help: ArgumentHelp("How many lines to print (default: until interrupted).", valueName: "n"))
    var count: Int?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
    }

    func run() throws {
        exitOnInterrupt()
        let (client, _) = try openStream(Request(id: 1, cmd: .levels), global)
        var printed = 0
        while count.map({ printed < $0 }) ?? true {
            let raw = try nextLine(client, seconds: global.timeout ?? 15, waitingFor: "levels")
            print(String(decoding: raw, as: UTF8.self))
            fflush(nil)
            printed += 1
        }
    }
}
