import ArgumentParser
import ReelControl

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resume a paused recording in the same file.")

    @OptionGroup var global: GlobalOptions

    func run() throws {
        _ = try perform(.resume, options: global)
    }
}
