import ArgumentParser
import ReelControl

struct Stop: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop recording; waits until the file is complete and prints its final path.")

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let reply = try perform(.stop, options: global, defaultTimeoutSeconds: 60)
        print(try requireFile(reply, .stop))
    }
}
