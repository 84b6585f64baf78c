import ArgumentParser
import ReelControl

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resume a paused recording in the same file (a new take).")

    @Option(name: .long, help: ArgumentHelp(
        "Label of the take this resume begins: its chapter title in the finished file (default: 'Take N'). At most 255 bytes, no control characters.",
        valueName: "text"))
    var label: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws { try validateLabel(label) }

    func run() throws {
        _ = try perform(.resume, label: label, options: global)
    }
}
