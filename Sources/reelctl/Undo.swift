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

            With --take N it removes take N only if that is the last take, and is refused otherwise \
            (naming the last take): a retry after a lost answer (a timeout) cannot remove a second \
            take. An undo reeld did not carry out within 10 s (or --timeout, if shorter) is cancelled, never \
            applied later.
            """)

    @Option(name: .long, help: ArgumentHelp("Remove this take only if it is the last one (see 'reelctl takes'); safe to retry.",
                                            valueName: "N"))
    var take: Int?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let take, let problem = Wire.takeProblem(take) {
            throw ValidationError(problem.replacingOccurrences(of: "\"take\"", with: "--take"))
        }
    }

    func run() throws {
        _ = try perform(.undo, take: take, options: global)
    }
}
