import Foundation
import ReelCore

/// The merged settings: every key's typed value (`values`), and where each came from.
public struct DaemonSettings: Sendable {
    /// Every setting, typed: the defaults, overridden by what the file, the environment and the
    /// flags gave, each checked (and parsed) as it was set.
    public private(set) var values = Settings.defaults
    /// What the file, the environment and the flags gave, as written, and where: the last layer
    /// to set each key. A key absent here has its default.
    public private(set) var given: [SettingKey: Given] = [:]
    /// The config file read, if any.
    public var filePath: String?
    /// Things that are not errors but probably mistakes (a REEL_ variable close to a setting's name).
    public internal(set) var warnings: [String] = []
    /// `[camera.controls]`: set at every open of a V4L2 camera, in file order. Only the form
    /// of each name and the type of each value are checked here; the camera checks the rest
    /// when it is opened (`start` fails naming the line).
    public internal(set) var cameraControls: [CameraControlAssignment] = []

    /// A value as written, and where.
    public struct Given: Sendable, Equatable {
        public var value: SettingValue
        public var origin: SettingOrigin
    }

    public static let defaultConfigPath = "/etc/reel/reeld.toml"

    public init() {}

    /// Where `key`'s value came from.
    public func origin(of key: SettingKey) -> SettingOrigin { given[key]?.origin ?? .defaultValue }

    /// `key`'s value as written (its default's when nothing set it), for `report`.
    public func written(_ key: SettingKey) -> SettingValue { given[key]?.value ?? key.defaultValue }

    /// The keys whose values differ between these settings and `other` (SIGHUP: which of those
    /// that apply only after a restart changed).
    public func keysDiffering(from other: DaemonSettings) -> [SettingKey] {
        SettingKey.allCases.filter { !$0.spec.field.same(values, other.values) }
    }

    /// A problem with `key`'s value found past the table's checks (by what combines keys, or
    /// opens a file it names), naming where the value was set when that was the file or the
    /// environment; `what` names the flag itself, as the user wrote it.
    public func error(_ key: SettingKey, _ what: String) -> ConfigError {
        let origin = origin(of: key)
        switch origin {
        case .flag, .defaultValue: return ConfigError(what, origin: origin)
        case .file, .environment: return ConfigError("\(origin): key '\(key.rawValue)': \(what)", origin: origin)
        }
    }

    /// For a one-shot `reeld record`: the daemon's settings it was given that it does not use
    /// (`SettingSpec.serveOnly`). `errors` for flags (the caller asked for what will not happen),
    /// `warnings` for the environment (it may be set for the daemon as well); the config file,
    /// shared with the daemon, says nothing.
    public var serveOnlyProblems: (errors: [String], warnings: [String]) {
        var errors: [String] = [], warnings: [String] = []
        for key in SettingKey.allCases where key.spec.serveOnly {
            switch origin(of: key) {
            case .flag:
                errors.append("\(key.flag) is a setting of the daemon ('reeld serve'); 'reeld record' does not use it: remove it")
            case let .environment(name):
                warnings.append("environment variable \(name) is a setting of the daemon ('reeld serve'); 'reeld record' ignores it")
            case .file, .defaultValue: break
            }
        }
        return (errors, warnings)
    }

    /// Layers file, environment and flags over the defaults. `configPath` nil means
    /// $REEL_CONFIG, else /etc/reel/reeld.toml if it exists (an explicit path must exist).
    public static func resolve(configPath: String?, environment: [String: String],
                               flags: [SettingKey: SettingValue]) throws(ConfigError) -> DaemonSettings {
        var s = DaemonSettings()
        var path = configPath
        var explicit = configPath != nil
        if path == nil, let e = environment["REEL_CONFIG"], !e.isEmpty { path = e; explicit = true }
        if path == nil, FileManager.default.fileExists(atPath: defaultConfigPath) { path = defaultConfigPath }
        if let path {
            if !explicit && !FileManager.default.isReadableFile(atPath: path) {
                throw ConfigError("cannot read \(path): permission denied (make it readable by reeld, or pass --config)")
            }
            try s.apply(file: path)
        }
        for k in SettingKey.allCases {
            if let raw = environment[k.environmentVariable] {
                let origin = SettingOrigin.environment(k.environmentVariable)
                try s.set(k, try parse(raw, for: k, origin: origin), origin: origin)
            }
        }
        for k in SettingKey.allCases {
            if let v = flags[k] { try s.set(k, v, origin: .flag(k.flag)) }
        }
        if !s.cameraControls.isEmpty, case .camera = s.values.video {} else if !s.cameraControls.isEmpty {
            s.warnings.append("[camera.controls] in \(s.filePath ?? "the config file") is ignored: the video source is \(show(s.written(.video).text)), not a V4L2 camera")
        }
        let known = Set(SettingKey.allCases.map(\.environmentVariable) + ["REEL_CONFIG"])
        for name in environment.keys.sorted() where name.hasPrefix("REEL_") && !known.contains(name) && !name.hasPrefix("REEL_TEST_") {
            if let near = closest(to: String(name.dropFirst(5))) {
                s.warnings.append("environment variable \(show(name, quoted: false)) is not a reeld setting and is ignored (did you mean \(near.environmentVariable)?)")
            }
        }
        return s
    }

    /// A flag or environment string as a value of `key` as written (its check comes when it is set).
    public static func parse(_ raw: String, for key: SettingKey, origin: SettingOrigin) throws(ConfigError) -> SettingValue {
        switch key.kind {
        case .string, .stringOrInt: return .string(raw)
        case .strings: return .strings(raw.isEmpty ? [] : [raw])
        case .bool:
            switch raw.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true", "yes", "on", "1": return .bool(true)
            case "false", "no", "off", "0": return .bool(false)
            default: throw ConfigError.at(origin, key: key.rawValue, "'\(raw)' is not true or false")
            }
        case .int:
            guard let i = Int(raw.trimmingCharacters(in: .whitespaces)) else {
                throw ConfigError.at(origin, key: key.rawValue, "'\(raw)' is not an integer")
            }
            return .int(i)
        }
    }

    /// Checks `v` and keeps it, typed, as `k`'s value from `origin`.
    mutating func set(_ k: SettingKey, _ v: SettingValue, origin: SettingOrigin) throws(ConfigError) {
        if let problem = k.spec.field.write(v, &values) { throw ConfigError.at(origin, key: k.rawValue, problem) }
        given[k] = Given(value: v, origin: origin)
    }

    /// One line per key: `key = value  # origin`, for `reeld --check-config`.
    public var report: String {
        var lines = SettingKey.allCases.map { "\($0.rawValue) = \(written($0))  # \(origin(of: $0))" }
        if !cameraControls.isEmpty {
            lines.append("[camera.controls]")
            for c in cameraControls {
                let v: String
                if case let .text(t) = c.input { v = "\"\(t)\"" } else { v = c.input.description }
                lines.append("\(c.name) = \(v)  # \(c.origin.components(separatedBy: ": [camera").first ?? c.origin)")
            }
        }
        return lines.joined(separator: "\n")
    }
}

extension SettingValue {
    /// The value as plain text, for messages (a string without its quotes).
    var text: String {
        switch self {
        case let .string(s): return s
        case let .int(i): return String(i)
        case let .strings(a): return a.joined(separator: " ")
        case let .bool(b): return String(b)
        }
    }
}
