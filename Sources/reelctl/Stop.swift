import ArgumentParser
import ReelControl

struct Stop: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop recording; waits until the file is complete and prints its final path.")

    @Flag(name: .long, help: "Print the status at the end of the recording (its segments, frames, drops; lastFile is the final path) as one JSON object instead.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let reply = try perform(.stop, options: global, defaultTimeoutSeconds: 60)
        let file = try requireFile(reply, .stop)
        if json, let status = reply.status {
            print(try Wire.text(status))
        } else {
            print(file)
        }
    }
}
