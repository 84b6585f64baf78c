/// The settings as command-line flags, from the setting table (`SettingKey.spec`): `--crf 20` or
/// `--crf=20` for `crf`. A boolean setting's flag alone means true (`--standby`, as reeld's own
/// `--unpaced`); `--standby=false` or `--standby false` set it either way. reeld's
/// ArgumentParser declares its other options and hands these over as the arguments it did not
/// recognize; their help is `SettingDocs.flagHelp`.
public enum SettingFlags {
    /// The settings given, the last of a repeated flag winning; an error for anything else,
    /// naming it (reeld makes it a usage error, exit status 64). Values are checked later, with
    /// the file's and the environment's, by `DaemonSettings.resolve` (`invalid --crf: 99 is out
    /// of range ...`); only their form is checked here (`invalid --crf: 'x' is not an integer`).
    public static func parse(_ arguments: [String]) throws(ConfigError) -> [SettingKey: SettingValue] {
        let byFlag = Dictionary(uniqueKeysWithValues: SettingKey.allCases.map { ($0.flag, $0) })
        var settings: [SettingKey: SettingValue] = [:]
        var i = arguments.startIndex
        while i < arguments.endIndex {
            let argument = arguments[i]
            i += 1
            guard argument.hasPrefix("--") else {
                throw ConfigError("Unexpected argument '\(argument)' (reeld takes no positional arguments; see --help)")
            }
            let name = String(argument.prefix { $0 != "=" })
            guard let key = byFlag[name] else {
                let hint = DaemonSettings.closest(to: String(name.dropFirst(2))).map { " Did you mean '\($0.flag)'?" } ?? ""
                throw ConfigError("Unknown option '\(name)'.\(hint)")
            }
            let value: String
            if name.count < argument.count {
                value = String(argument.dropFirst(name.count + 1))
            } else if i < arguments.endIndex, !arguments[i].hasPrefix("--") {
                // reeld takes no positional arguments: what follows a flag is its value.
                value = arguments[i]
                i += 1
            } else if key.kind == .bool {
                settings[key] = .bool(true)
                continue
            } else {
                throw ConfigError("Missing value for '\(name) <value>' (write \(name)=VALUE for a value that starts with '--')",
                                  origin: .flag(name))
            }
            settings[key] = try DaemonSettings.parse(value, for: key, origin: .flag(key.flag))
        }
        return settings
    }
}
