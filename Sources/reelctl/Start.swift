import ArgumentParser
import ReelControl
import ReelCore

struct Start: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start recording; prints the path of the file being written (a .part until stopped).")

    @Option(name: .long, help: ArgumentHelp("Base name of the recording, e.g. 'clip' for clip.mp4 (default: chosen by reeld).",
                                            valueName: "name"))
    var name: String?

    @Option(name: .long, help: ArgumentHelp(
        "Label of the first take: its chapter title in the finished file (default: 'Take 1'). At most 255 bytes, no control characters.",
        valueName: "text"))
    var label: String?

    @Option(name: .long, help: ArgumentHelp(
        "Length cap of this recording in seconds (up to 3 decimals, e.g. 90 or 2.5): it stops by itself, its file finished, once it holds this much (pauses do not count); 0 for none. Default: reeld's max_duration.",
        valueName: "seconds"))
    var maxDuration: String?

    @Option(name: .long, help: ArgumentHelp(
        "Pre-roll of this recording in seconds (up to 3 decimals, e.g. 1.5): it begins this long before the request reached reeld; at most reeld's pre_roll (what standby keeps), which is the default; 0 for none.",
        valueName: "seconds"))
    var preRoll: String?

    @Flag(name: .long, help: "Print the reply as JSON instead: the .part path as \"file\" and, with standby, the start instant as \"startNs\" (CLOCK_MONOTONIC ns on reeld's host; nothing captured before it is recorded) and the pre-roll it got as \"preRollNs\" (startNs + preRollNs is when the request reached reeld).")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let name, let problem = Wire.nameProblem(name) {
            throw ValidationError(problem.replacingOccurrences(of: "\"name\"", with: "--name"))
        }
        try validateLabel(label)
        if let maxDuration, LengthCap.parse(maxDuration) == nil {
            throw ValidationError("--max-duration \(LengthCap.problem(maxDuration))")
        }
        if let preRoll, PreRoll.parse(preRoll) == nil {
            throw ValidationError("--pre-roll \(PreRoll.problem(preRoll))")
        }
    }

    func run() throws {
        let cap = maxDuration.flatMap(LengthCap.parse)
        let reply = try perform(.start, name: name, label: label, maxDurationNs: cap, options: global,
                                preRollNs: preRoll.flatMap(PreRoll.parse))
        let file = try requireFile(reply, .start)
        if json {
            struct Out: Encodable { let file: String; let startNs: Nanos?; let preRollNs: Nanos? }
            print(try Wire.text(Out(file: file, startNs: reply.startNs, preRollNs: reply.preRollNs)))
        } else {
            print(file)
        }
    }
}
