import ArgumentParser
import ReelControl
import ReelCore

struct Controls: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the camera's controls (brightness, exposure, white balance, ...) with their ranges and values.",
        discussion: """
            Names are spelled as v4l2-ctl spells them; they are what 'reelctl set' and the \
            [camera.controls] table of reeld.toml take. Works while idle (reeld opens the camera \
            briefly) and while recording. Menu entries are listed under their control.
            """)

    @Flag(name: .long, help: "Print the protocol's controls array as JSON instead.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let controls = try required(perform(.controls, options: global).controls, in: .controls, "a list")
        if json {
            print(ControlsText.json(controls))
        } else {
            print(ControlsText.render(controls), terminator: "")
        }
    }
}

struct SetControls: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Change camera controls now, while idle or recording: reelctl set brightness=140 power_line_frequency=\"50 Hz\".",
        discussion: """
            Each NAME=VALUE names a control as 'reelctl controls' lists it. VALUE is an integer, \
            true/false (or 1/0), or a menu entry's name (any case) or index. Every value is checked \
            against the camera's range before any is set; then all are set together. reeld keeps \
            them and sets them again at every later recording (over [camera.controls] in reeld.toml) \
            until it restarts, or until another camera appears at the device (a different driver, \
            name or USB port): those are dropped then. Prints each control as read back from the camera.

            --reset clears them: 'reelctl set --reset' all of them, 'reelctl set --reset brightness \
            contrast' those; the camera goes back at once to the value in [camera.controls], else to \
            its default, and later recordings no longer set them.
            """)

    @Argument(help: ArgumentHelp("Controls to set (with --reset: control names to reset, none for all).", valueName: "NAME=VALUE"))
    var assignments: [String] = []

    @Flag(name: .long, help: "Clear what earlier 'reelctl set's changed: all of it, or the NAMEs given.")
    var reset = false

    @Flag(name: .long, help: "Print the controls read back as JSON instead.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if reset { _ = try resetting() } else { _ = try parsed() }
    }

    /// `--reset`'s controls: all (none named), or the names given.
    func resetting() throws -> ControlReset {
        if let a = assignments.first(where: { $0.contains("=") }) {
            throw ValidationError("'\(a)': --reset takes control names, not NAME=VALUE (reset first, then set)")
        }
        return assignments.isEmpty ? .all : .only(assignments)
    }

    func parsed() throws -> [String: CameraControlInput] {
        guard !assignments.isEmpty else { throw ValidationError("'set' needs NAME=VALUE, e.g. reelctl set brightness=140 (see 'reelctl controls')") }
        var out: [String: CameraControlInput] = [:]
        for a in assignments {
            guard let eq = a.firstIndex(of: "="), eq != a.startIndex else {
                throw ValidationError("'\(a)' is not NAME=VALUE, e.g. brightness=140 (see 'reelctl controls')")
            }
            let name = String(a[..<eq])
            guard out[name] == nil else { throw ValidationError("\(name) is given twice; give each control once") }
            out[name] = .text(String(a[a.index(after: eq)...]))
        }
        return out
    }

    func run() throws {
        let reply = reset ? try perform(.set, reset: try resetting(), options: global)
                          : try perform(.set, args: try parsed(), options: global)
        let controls = reply.controls ?? []
        if json {
            print(ControlsText.json(controls))
        } else {
            for c in controls { print("\(c.name)=\(c.value.map(c.show) ?? "?")") }
        }
    }
}

