import ArgumentParser
import Foundation
import ReelControl

struct Takes: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the takes of the recording: number, title (its chapter), start and duration in the output.",
        discussion: """
            A take runs from a start or resume to the next pause or stop; its title is its label \
            (start/resume --label) or "Take N". The open take's duration shows as "-". While idle \
            the list is empty.
            """)

    @Flag(name: .long, help: "Print {\"takes\":[...]} as in the protocol instead.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let takes = try required(perform(.takes, options: global).takes, in: .takes, "takes")
        if json {
            var r = Reply(ok: true)
            r.takes = takes
            // Only the list: {"takes":[...]}
            let text = try Wire.text(r)
            let list = text.range(of: "\"takes\":").map { "{" + text[$0.lowerBound...] } ?? text
            print(list)
        } else {
            print(StatusText.takesTable(takes), terminator: "")
        }
    }
}
