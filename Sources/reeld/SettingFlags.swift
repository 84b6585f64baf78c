import ArgumentParser
import ReelConfig

/// The settings as flags, from the setting table (`SettingKey.spec`): `--crf 20` or `--crf=20`
/// for `crf`. ArgumentParser declares reeld's other options; these reach `parse` as the
/// arguments it did not recognize, and their help is `SettingDocs.flagHelp`.
enum SettingFlags {
    /// The settings given, the last of a repeated flag winning; a ValidationError (usage, exit
    /// status 64) for anything else, naming it. Values are checked later, with the file's and
    /// the environment's, by `DaemonSettings.resolve` (`invalid --crf: 99 is out of range ...`).
    static func parse(_ arguments: [String]) throws -> [SettingKey: SettingValue] {
        let byFlag = Dictionary(uniqueKeysWithValues: SettingKey.allCases.map { ($0.flag, $0) })
        var settings: [SettingKey: SettingValue] = [:]
        var i = arguments.startIndex
        while i < arguments.endIndex {
            let argument = arguments[i]
            i += 1
            guard argument.hasPrefix("--") else {
                throw ValidationError("Unexpected argument '\(argument)' (reeld takes no positional arguments; see --help)")
            }
            let name = String(argument.prefix { $0 != "=" })
            guard let key = byFlag[name] else {
                let hint = DaemonSettings.closest(to: String(name.dropFirst(2))).flatMap(SettingKey.init(rawValue:)).map { " Did you mean '\($0.flag)'?" } ?? ""
                throw ValidationError("Unknown option '\(name)'.\(hint)")
            }
            let value: String
            if name.count < argument.count {
                value = String(argument.dropFirst(name.count + 1))
            } else {
                guard i < arguments.endIndex, !arguments[i].hasPrefix("--") else {
                    throw ValidationError("Missing value for '\(name) <value>' (write \(name)=VALUE for a value that starts with '--')")
                }
                value = arguments[i]
                i += 1
            }
            do { settings[key] = try DaemonSettings.parse(value, for: key, origin: .flag(key.flag)) }
            catch { throw ValidationError(error.description) }
        }
        return settings
    }
}
