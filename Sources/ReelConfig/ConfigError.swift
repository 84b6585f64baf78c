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
    /// Where the value or the text at fault was written; nil for a file that cannot be read at
    /// all (its message names it) or a flag that is not a setting.
    public var origin: SettingOrigin?

    public init(_ d: String, origin: SettingOrigin? = nil) {
        description = d
        self.origin = origin
    }

    static func at(_ origin: SettingOrigin, key: String, _ what: String) -> ConfigError {
        switch origin {
        case .flag(let f): return ConfigError("invalid \(f): \(what)", origin: origin)
        case .environment(let v): return ConfigError("invalid environment variable \(v) (key '\(key)'): \(what)", origin: origin)
        case .file, .defaultValue: return ConfigError("\(origin): key '\(key)': \(what)", origin: origin)
        }
    }
}

extension DaemonSettings {
    /// The known key a mistyped one most likely meant: the same after lower-casing, '-' for '_'
    /// and dropping a REEL_ or -- prefix; else one within a small edit distance; else one
    /// sharing its first four characters.
    public static func closest(to key: String) -> SettingKey? {
        var norm = key.lowercased().replacingOccurrences(of: "-", with: "_")
        for prefix in ["reel_", "__"] where norm.hasPrefix(prefix) { norm = String(norm.dropFirst(prefix.count)) }
        if let exact = SettingKey(rawValue: norm) { return exact }
        guard norm.count <= 64 else { return nil }
        let scored = SettingKey.allCases.map { ($0, editDistance(norm, $0.rawValue)) }.min { $0.1 < $1.1 }
        if let (near, d) = scored, d <= max(1, min(norm.count, near.rawValue.count) / 3) { return near }
        guard norm.count >= 4 else { return nil }
        return SettingKey.allCases.first { $0.rawValue.hasPrefix(norm.prefix(4)) }
    }

    /// Levenshtein distance, for did-you-mean.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars), b = Array(b.unicodeScalars)
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var prev = row[0]
            row[0] = i
            for j in 1...max(1, b.count) where !b.isEmpty {
                let cur = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1))
                prev = cur
            }
        }
        return a.isEmpty ? b.count : row[b.count]
    }
}
