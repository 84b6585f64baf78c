

/// What the setting table (`SettingKey.spec`) documents: config/reeld.toml as shipped
/// (`reeld --print-config`; SettingTableTests fails when the shipped file differs) and the
/// settings part of `reeld --help`.
public enum SettingDocs {
    /// config/reeld.toml: every key with its comment and its default, by section.
    public static var configFile: String {
        let restart = SettingKey.allCases.filter(\.spec.restartToApply).map(\.rawValue)
        var out = """
        # /etc/reel/reeld.toml: configuration of reeld, the Reel recorder daemon.
        # Generated from reeld's setting table by `reeld --print-config` (`make config/reeld.toml`).
        #
        # Precedence: reeld's flags > REEL_* environment variables (REEL_OUTPUT_DIR for output_dir, and
        # so on) > this file > built-in defaults. Every key is listed here with its default value.
        # An unknown key or a bad value stops reeld with an error naming this file, the line and the key.
        # Check an edit with `reeld --check-config`, then apply it with `systemctl reload reeld`:
        # the new values apply from the next recording; a recording in progress is not disturbed.
        # \(listed(restart)) apply only after `systemctl restart reeld`.

        """
        for section in SettingSpec.Section.allCases {
            let title = "# --- \(section.rawValue) "
            out += "\n" + title + String(repeating: "-", count: max(3, 95 - title.count)) + "\n"
            for key in SettingKey.allCases where key.spec.section == section {
                for line in key.spec.doc.split(separator: "\n", omittingEmptySubsequences: false) {
                    out += line.isEmpty ? "#\n" : "# \(line)\n"
                }
                out += "\(key.rawValue) = \(toml(key.defaultValue, kind: key.kind))\n"
            }
        }
        out += "\n" + cameraControlsDoc + "\n" + buttonDoc
        return out
    }

    /// The one table of reeld.toml, last (a TOML table takes every key after its header).
    static let cameraControlsDoc = """
    # --- Camera controls -------------------------------------------------------------------------
    # V4L2 controls set on the camera each time reeld opens it (for a recording, and for
    # `reelctl controls`/`set` while idle), named as `reelctl controls` and `v4l2-ctl -l` list them.
    # A value is an integer, true/false, or a string: a menu entry's name ("50 Hz") or its index.
    # `reelctl set NAME=VALUE` changes one live; it wins over this table until reeld restarts.
    # A control the camera does not have, or a value out of its range, makes `start` fail with an
    # error naming this file and line (`reelctl controls` still works). Only [camera.controls] is
    # read under [camera]; ignored unless the video source is a camera. For example:
    # [camera.controls]
    # brightness = 140
    # white_balance_automatic = false
    # power_line_frequency = "50 Hz"

    """

    /// reel-button's table (Sources/ReelButton/ButtonConfig.swift reads it; reeld skips it), after
    /// [camera.controls]'s example.
    static let buttonDoc = """
    # --- Button and tally light (reel-button) -----------------------------------------------------
    # reel-button drives reeld with a foot pedal, a keyboard or any Linux input device, one per
    # `systemctl enable --now reel-button@NAME` (NAME as in `ls /dev/input/by-id/`, e.g.
    # usb-Pedal-event-kbd). reeld skips this table. Keys are named as the kernel names them
    # (KEY_SPACE, BTN_0, KEY_F13; `evtest DEVICE` lists a device's), one name or an array of names:
    #   hold:   press starts or resumes, release pauses
    #   toggle: press starts, resumes or pauses
    #   retake: press undoes the last take (a retake)
    #   stop:   press stops and finishes the file
    # long_press_ms: a hold key held this long stops (0: never), for a pedal with one key.
    # debounce_ms: after a press or release, a key's bounces for this long are ignored.
    # led: the tally light: on while recording, slow blink while paused, off while idle, fast blink
    # when something is wrong (reeld unreachable, the device unplugged, an error, a command
    # refused). The input device's own LED ("LED_MISC", "LED_CAPSL"), or a LED class device
    # ("/sys/class/leds/tally", e.g. from dtoverlay=gpio-led on a Raspberry Pi; README); "" none.
    # A key or LED the device does not offer stops reel-button with an error naming this file,
    # the line and the names the device offers. For example:
    [button]
    hold = "KEY_SPACE"
    # toggle = "BTN_0"
    # retake = "KEY_BACKSPACE"
    # stop = "KEY_ESC"
    long_press_ms = 0
    debounce_ms = 30
    led = ""

    """

    /// The settings for `reeld --help`: each flag with its help, allowed values, default,
    /// variable and file key, wrapped to `width` columns.
    public static func flagHelp(width: Int = 79) -> String {
        let indent = 26
        var out = "SETTINGS (flag > REEL_* environment variable > reeld.toml key > default):\n"
        for key in SettingKey.allCases {
            let spec = key.spec
            let value: String
            switch spec.kind {
            case .int: value = "<n>"
            case .strings: value = "<program>"
            case .bool: value = "[<bool>]"
            case .string, .stringOrInt: value = "<value>"
            }
            let head = "  \(key.flag) \(value)"
            var text = spec.help
            if case let .oneOf(allowed) = spec.rule, !text.contains(allowed.joined(separator: ", ")) {
                text += " One of \(allowed.joined(separator: ", "))."
            }
            if spec.kind == .bool { text += " \(key.flag) alone means true." }
            text += " Default: \(shown(key.defaultValue)). \(key.environmentVariable), \(key.rawValue)."
            if spec.serveOnly { text += " 'reeld serve' only." }
            let lines = wrap(text, width: width - indent)
            if head.count + 2 <= indent {
                out += head.padding(toLength: indent, withPad: " ", startingAt: 0) + lines[0] + "\n"
                lines.dropFirst().forEach { out += String(repeating: " ", count: indent) + $0 + "\n" }
            } else {
                out += head + "\n"
                lines.forEach { out += String(repeating: " ", count: indent) + $0 + "\n" }
            }
        }
        return out
    }

    /// A default as --help shows it: "none" for "" and [].
    static func shown(_ v: SettingValue) -> String {
        switch v {
        case .string(""), .strings([]): return "none"
        case let .string(s): return s
        case let .int(i): return String(i)
        case let .strings(a): return a.joined(separator: " ")
        case let .bool(b): return String(b)
        }
    }

    /// A value as TOML; a string key that also takes integers (fps) shows an integer bare.
    static func toml(_ v: SettingValue, kind: SettingSpec.Kind) -> String {
        func quoted(_ s: String) -> String {
            "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        switch v {
        case let .string(s): return kind == .stringOrInt && Int(s) != nil ? s : quoted(s)
        case let .int(i): return String(i)
        case let .strings(a): return "[" + a.map(quoted).joined(separator: ", ") + "]"
        case let .bool(b): return String(b)
        }
    }

    /// "a, b and c".
    static func listed(_ names: [String]) -> String {
        names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }

    /// Words into lines of at most `width` characters (a longer word gets a line of its own).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && line.count + 1 + word.count > width { lines.append(line); line = "" }
            line += (line.isEmpty ? "" : " ") + word
        }
        return lines + [line]
    }
}
