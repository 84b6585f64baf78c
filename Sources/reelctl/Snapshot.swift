import ArgumentParser
import ReelCommandLine
import Foundation
import ReelControl
import ReelCore
import ReelSystem

struct Snapshot: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a JPEG of the camera's latest frame (while recording, paused, or idle).",
        discussion: """
            reeld sends the image over the socket and reelctl writes it, so it works for any user \
            allowed on the socket, wherever reeld itself may write. While recording or paused, and \
            while idle with standby = true, it is the next frame the open camera delivers (within \
            about a frame); otherwise reeld opens the camera briefly (as long as the camera takes to \
            start). Prints the file's path, size and when the frame was captured.
            """)

    @Option(name: .shortAndLong, help: ArgumentHelp("Where to write the JPEG, a new file ('-' for stdout; default: snapshot-YYYYmmdd-HHMMSS.jpg here).",
                                                   valueName: "file"))
    var output: String?

    @Option(name: .long, help: ArgumentHelp("Scale the image to this width in pixels (16 up to the camera's width; the height follows).",
                                            valueName: "pixels"))
    var width: Int?

    @Flag(name: .long, help: "Print the reply's snapshot object without the image (width, height, capturedNs, bytes) as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let width, width < 16 { throw ValidationError("--width must be at least 16 pixels (the height follows the camera's aspect)") }
    }

    func run() throws {
        let reply = try perform(.snapshot, width: width, options: global)
        let (snap, jpeg) = try required(reply.snapshot.flatMap { s in s.jpegBytes.flatMap { $0.count == s.bytes ? (s, $0) : nil } },
                                        in: .snapshot, "a readable image")
        let path = output ?? Self.defaultName()
        if path == "-" {
            FileHandle.standardOutput.write(Data(jpeg))
        } else {
            // As the user running reelctl, into a file it creates (never through a link planted
            // at the name, never over a file there; reeld never touches it).
            if let f = jpeg.withUnsafeBytes({ Sys.writeFile(path, $0) }) {
                if !f.created, f.errno == EEXIST {
                    printError(Sys.createFailure(path, errno: f.errno, fix: "reelctl never writes through a link or over a file; or choose another -o FILE"))
                } else {
                    printError("cannot write \(path): \(Errno.text(f.errno)) (choose another -o FILE, somewhere you may write)")
                }
                throw ExitCode(ExitStatus.refused)
            }
        }
        let info = "\(snap.width)x\(snap.height), \(snap.bytes) bytes, captured at \(snap.capturedNs) ns (CLOCK_MONOTONIC on reeld's host)"
        if json {
            struct Out: Encodable { let file: String; let width: Int; let height: Int; let capturedNs: Nanos; let bytes: Int }
            let text = try Wire.text(Out(file: path, width: snap.width, height: snap.height, capturedNs: snap.capturedNs, bytes: snap.bytes))
            if path == "-" { FileHandle.standardError.write(Data((text + "\n").utf8)) } else { print(text) }
        } else if path != "-" {
            print("\(path): \(info)")
        }
    }

    static func defaultName() -> String {
        var t = time(nil)
        var tmv = tm()
        localtime_r(&t, &tmv)
        var buf = [CChar](repeating: 0, count: 40)
        strftime(&buf, buf.count, "snapshot-%Y%m%d-%H%M%S.jpg", &tmv)
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
