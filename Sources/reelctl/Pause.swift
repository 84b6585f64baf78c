import ArgumentParser
import ReelControl

struct Pause: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pause the recording (the file stays open; resume continues it).")

    @OptionGroup var global: GlobalOptions

    func run() throws {
        _ = try perform(.pause, options: global)
    }
}
