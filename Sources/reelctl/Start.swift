import ArgumentParser
import ReelControl

struct Start: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start recording; prints the path of the file being written (a .part until stopped).")

    @Option(name: .long, help: ArgumentHelp("Base name of the recording, e.g. 'clip' for clip.mp4 (default: chosen by reeld).",
                                            valueName: "name"))
    var name: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let name, let problem = Wire.nameProblem(name) {
            throw ValidationError(problem.replacingOccurrences(of: "\"name\"", with: "--name"))
        }
    }

    func run() throws {
        let reply = try perform(.start, name: name, options: global)
        print(try requireFile(reply, .start))
    }
}
