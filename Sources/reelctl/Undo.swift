import ArgumentParser
import ReelControl

struct Undo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove the last take from the recording (a retake).",
        discussion: """
            While paused, removes the last take from the file; while recording, ends the current take, \
            removes it and leaves the recording paused. Repeat to remove earlier takes. The next resume \
            continues right after the takes kept; stopping with none left leaves no file. Kept takes are \
            never re-encoded: the file is cut back to where the removed take began.
            """)

    @OptionGroup var global: GlobalOptions

    func run() throws {
        _ = try perform(.undo, options: global)
    }
}
