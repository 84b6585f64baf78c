import ArgumentParser
import Foundation
import ReelControl

struct Stop: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop recording; waits until the file is complete and prints its final path.")

    @Flag(name: .long, help: "Print the status at the end of the recording (its segments, frames, drops; lastFile is the final path) as one JSON object instead.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let reply = try perform(.stop, options: global, defaultTimeoutSeconds: 60)
        if reply.file == nil, let status = reply.status, status.takes.isEmpty {
            // Every take was undone: stopped, and no file (none is wanted).
            if json { print(try Wire.text(status)) }
            FileHandle.standardError.write(Data("reelctl: stopped; every take was undone, so no file was kept\n".utf8))
            return
        }
        let file = try requireFile(reply, .stop)
        if json, let status = reply.status {
            print(try Wire.text(status))
        } else {
            print(file)
        }
    }
}
