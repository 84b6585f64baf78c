import Foundation
import ReelCore

/// One setting's value, as TOML types it.
public enum SettingValue: Sendable, Equatable, CustomStringConvertible {
    case string(String)
    case int(Int)
    case strings([String])

    public var description: String {
        switch self {
        case let .string(s): return "\"\(s)\""
        case let .int(i): return String(i)
        case let .strings(a): return "[" + a.map { "\"\($0)\"" }.joined(separator: ", ") + "]"
        }
    }
}

/// Every key reeld reads from `reeld.toml`, the `REEL_*` environment and its flags.
/// Precedence: flag > environment > file > default. Each key is documented in config/reeld.toml.
public enum SettingKey: String, CaseIterable, Sendable {
    case socket, outputDir = "output_dir", video, audio, size, fps, pixelFormat = "pixel_format"
    case sampleRate = "sample_rate", channels, preset, tune, crf, bitrate, keyint, profile
    case audioBitrate = "audio_bitrate", logLevel = "log_level", controlGroup = "control_group"
    case controlUser = "control_user", minFreeMB = "min_free_mb", onFinish = "on_finish"
    case onFinishTimeout = "on_finish_timeout", fsync

    enum Kind { case string, int, stringOrInt, strings }

    var kind: Kind {
        switch self {
        case .sampleRate, .channels, .crf, .bitrate, .keyint, .audioBitrate, .minFreeMB, .onFinishTimeout: return .int
        case .fps: return .stringOrInt
        case .onFinish: return .strings
        default: return .string
        }
    }

    /// `--output-dir` for `output_dir`.
    public var flag: String { "--" + rawValue.replacingOccurrences(of: "_", with: "-") }
    /// `REEL_OUTPUT_DIR` for `output_dir`.
    public var environmentVariable: String { "REEL_" + rawValue.uppercased() }

    public var defaultValue: SettingValue {
        switch self {
        case .socket: return .string("/run/reel/reeld.sock")
        case .outputDir: return .string("/var/lib/reel")
        // A capture box records its camera and microphone (tests and the demo ask for "test").
        case .video: return .string("/dev/video0")
        case .audio: return .string("alsa:default")
        case .size: return .string("640x360")
        case .fps: return .string("30")
        case .pixelFormat: return .string("yuyv")
        case .sampleRate: return .int(48000)
        case .channels: return .int(1)
        case .preset: return .string("veryfast")
        case .tune: return .string("")
        case .crf: return .int(23)
        case .bitrate: return .int(0)
        case .keyint: return .int(2)
        case .profile: return .string("high")
        case .audioBitrate: return .int(128_000)
        case .logLevel: return .string("info")
        case .controlGroup: return .string("reel")
        case .controlUser: return .string("")
        case .minFreeMB: return .int(500)
        case .onFinish: return .strings([])
        case .onFinishTimeout: return .int(120)
        case .fsync: return .string(FsyncPolicy.fragment.rawValue)
        }
    }

    /// Range and shape checks that need no other key: nil when fine, else what to use instead.
    func problem(_ v: SettingValue) -> String? {
        func intIn(_ r: ClosedRange<Int>, _ unit: String = "") -> String? {
            guard case let .int(i) = v else { return "expected an integer" }
            return r.contains(i) ? nil : "\(i) is out of range (use \(r.lowerBound) to \(r.upperBound)\(unit))"
        }
        func oneOf(_ allowed: [String]) -> String? {
            guard case let .string(s) = v else { return "expected a string" }
            return allowed.contains(s) ? nil : "'\(s)' is not one of \(allowed.joined(separator: ", "))"
        }
        switch self {
        case .sampleRate: return intIn(8000...192_000, " Hz")
        case .channels: return intIn(1...8)
        case .crf: return intIn(0...51)
        case .bitrate: return intIn(0...1_000_000, " kb/s; 0 means use crf")
        case .keyint: return intIn(1...60, " seconds")
        case .audioBitrate: return intIn(8000...512_000, " b/s")
        case .minFreeMB: return intIn(0...10_000_000, " MB")
        case .onFinishTimeout: return intIn(1...86_400, " seconds")
        case .logLevel: return oneOf(["trace", "debug", "info", "notice", "warning", "error", "critical"])
        case .profile: return oneOf(["baseline", "main", "high"])
        case .fsync: return oneOf(FsyncPolicy.allCases.map(\.rawValue))
        case .pixelFormat:
            // One list of pixel formats: the camera's (it accepts "i420" for "yuv420").
            guard case let .string(t) = v else { return "expected a string" }
            return CameraPixelFormat(name: t) != nil ? nil
                : "'\(t)' is not one of \((CameraPixelFormat.allCases.map(\.rawValue) + ["i420"]).joined(separator: ", "))"
        case .size:
            guard case let .string(t) = v else { return "expected a string" }
            let p = t.split(separator: "x")
            guard p.count == 2, let w = Int(p[0]), let h = Int(p[1]), w % 2 == 0, h % 2 == 0, (16...7680).contains(w), (16...4320).contains(h)
            else { return "'\(t)' is not WxH with even numbers from 16x16 to 7680x4320, e.g. \"640x360\"" }
            return nil
        case .fps:
            guard case let .string(t) = v else { return "expected an integer or a string" }
            // D is bounded first: 240 * D overflowed (a trap) for D above 3.8e16, e.g. "1/100000000000000000".
            guard let r = Rational(parsing: t), r.num > 0, r.den <= 1_000_000, r.num <= 240 * r.den else { return "'\(t)' is not N or N/D up to 240 (D at most 1000000), e.g. 30 or \"30000/1001\"" }
            return nil
        case .socket, .outputDir:
            guard case let .string(s) = v else { return "expected a string" }
            return s.isEmpty ? "must not be empty" : nil
        case .onFinish:
            guard case let .strings(a) = v else { return "expected an array of strings" }
            if let first = a.first, !first.hasPrefix("/") { return "the program '\(first)' must be an absolute path (it is run without a shell)" }
            return nil
        default: return nil
        }
    }
}

/// Where a setting's value came from, for error messages and `--check-config`.
public enum SettingOrigin: Sendable, Equatable, CustomStringConvertible {
    case defaultValue
    case file(path: String, line: Int?)
    case environment(String)
    case flag(String)

    public var description: String {
        switch self {
        case .defaultValue: return "default"
        case let .file(path, line): return line.map { "\(path):\($0)" } ?? path
        case let .environment(v): return "environment \(v)"
        case let .flag(f): return "flag \(f)"
        }
    }
}

/// A bad configuration: names the file and line (or variable, or flag), the key, and the fix.
public struct ConfigError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ d: String) { description = d }
    static func at(_ origin: SettingOrigin, key: String, _ what: String) -> ConfigError {
        switch origin {
        case .flag(let f): return ConfigError("invalid \(f): \(what)")
        case .environment(let v): return ConfigError("invalid environment variable \(v) (key '\(key)'): \(what)")
        default: return ConfigError("\(origin): key '\(key)': \(what)")
        }
    }
}

/// The merged settings: every key has a value and an origin.
public struct DaemonSettings: Sendable {
    public private(set) var values: [SettingKey: SettingValue] = [:]
    public private(set) var origins: [SettingKey: SettingOrigin] = [:]
    /// The config file read, if any.
    public var filePath: String?

    public static let defaultConfigPath = "/etc/reel/reeld.toml"

    public init() {
        for k in SettingKey.allCases { values[k] = k.defaultValue; origins[k] = .defaultValue }
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
                try s.set(k, try parse(raw, for: k, origin: .environment(k.environmentVariable)), origin: .environment(k.environmentVariable))
            }
        }
        for (k, v) in flags { try s.set(k, v, origin: .flag(k.flag)) }
        return s
    }

    /// A flag or environment string as a typed value of `key`.
    public static func parse(_ raw: String, for key: SettingKey, origin: SettingOrigin) throws(ConfigError) -> SettingValue {
        switch key.kind {
        case .string, .stringOrInt: return .string(raw)
        case .strings: return .strings(raw.isEmpty ? [] : [raw])
        case .int:
            guard let i = Int(raw.trimmingCharacters(in: .whitespaces)) else {
                throw ConfigError.at(origin, key: key.rawValue, "'\(raw)' is not an integer")
            }
            return .int(i)
        }
    }

    mutating func set(_ k: SettingKey, _ v: SettingValue, origin: SettingOrigin) throws(ConfigError) {
        if let p = k.problem(v) { throw ConfigError.at(origin, key: k.rawValue, p) }
        values[k] = v
        origins[k] = origin
    }

    mutating func apply(file path: String) throws(ConfigError) {
        let text: String
        do {
            let h = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? h.close() }
            guard let t = String(data: try h.readToEnd() ?? Data(), encoding: .utf8) else {
                throw ConfigError("config file \(path) is not UTF-8 text (save it as UTF-8)")
            }
            text = t
        } catch let e as ConfigError {
            throw e
        } catch {
            let why = access(path, F_OK) != 0 ? "no such file" : access(path, R_OK) != 0 ? "permission denied" : "\(error.localizedDescription)"
            throw ConfigError("cannot read config file \(path): \(why) (check the path and its permissions, or pass --config)")
        }
        try apply(text: text, path: path)
    }

    /// Layers the settings of a config file's `text` over these, as `apply(file: path)` does once
    /// it has read the file (public for the fuzzer, `make fuzz`).
    public mutating func apply(text: String, path: String) throws(ConfigError) {
        filePath = path
        let table: TOMLDocument
        do { table = try TOMLDocument(parsing: text) }
        catch {
            throw ConfigError("\(path):\(error.line): \(error.description) (fix the TOML syntax; see the comments in the installed reeld.toml)")
        }
        for key in table.keys.sorted() {
            let line = table.line(of: key)
            let origin = SettingOrigin.file(path: path, line: line)
            guard let k = SettingKey(rawValue: key) else {
                let hint = Self.closest(to: key).map { " (did you mean '\($0)'?)" } ?? ""
                throw ConfigError.at(origin, key: key, "unknown key\(hint); the keys are documented in \(Self.defaultConfigPath)")
            }
            let value = table[key]!
            let v: SettingValue
            switch (k.kind, value.type) {
            case (.string, .string), (.stringOrInt, .string): v = .string(value.string!)
            case (.int, .int), (.stringOrInt, .int): v = k.kind == .int ? .int(value.int!) : .string(String(value.int!))
            case (.strings, .array):
                var items: [String] = []
                for item in value.array! {
                    guard let s = item.string else { throw ConfigError.at(origin, key: key, "expected an array of strings") }
                    items.append(s)
                }
                v = .strings(items)
            default:
                let want: String
                switch k.kind {
                case .string: want = "a string (in quotes)"
                case .int: want = "an integer (no quotes)"
                case .stringOrInt: want = "an integer or a string"
                case .strings: want = "an array of strings"
                }
                let found: String
                switch value.type {
                case .int: found = "an integer"
                case .array: found = "an array"
                case .table: found = "a table"
                default: found = "a \(value.type)"
                }
                throw ConfigError.at(origin, key: key, "expected \(want), found \(found)")
            }
            try set(k, v, origin: origin)
        }
    }

    static func closest(to key: String) -> String? {
        let norm = key.lowercased().replacingOccurrences(of: "-", with: "_")
        if SettingKey(rawValue: norm) != nil { return norm }
        return SettingKey.allCases.map(\.rawValue).first { $0.hasPrefix(norm.prefix(4)) }
    }

    // MARK: typed access

    public func string(_ k: SettingKey) -> String {
        switch values[k]! {
        case let .string(s): return s
        case let .int(i): return String(i)
        case let .strings(a): return a.joined(separator: " ")
        }
    }
    public func int(_ k: SettingKey) -> Int { if case let .int(i) = values[k]! { return i }; return Int(string(k)) ?? 0 }
    public func strings(_ k: SettingKey) -> [String] { if case let .strings(a) = values[k]! { return a }; return [string(k)] }
    /// nil for an empty string.
    public func optionalString(_ k: SettingKey) -> String? { let s = string(k); return s.isEmpty ? nil : s }

    /// One line per key: `key = value  # origin`, for `reeld --check-config`.
    public var report: String {
        SettingKey.allCases.map { "\($0.rawValue) = \(values[$0]!)  # \(origins[$0]!)" }.joined(separator: "\n")
    }
}
