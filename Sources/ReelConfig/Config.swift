import Foundation
import ReelCore
import ReelMedia
import ReelStorage

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

    /// The allowed range of an integer key, and its unit for messages; nil for the other kinds.
    var intRange: (range: ClosedRange<Int>, unit: String)? {
        switch self {
        case .sampleRate: return (8000...192_000, " Hz")
        case .channels: return (1...8, "")
        // crf 0 is lossless, which none of the profiles allowed here can encode (x264 refuses it).
        case .crf: return (1...51, "; 0, lossless, needs a profile reeld does not offer")
        case .bitrate: return (0...1_000_000, " kb/s; 0 means use crf")
        case .keyint: return (1...60, " seconds")
        case .audioBitrate: return (8000...512_000, " b/s")
        case .minFreeMB: return (0...10_000_000, " MB")
        case .onFinishTimeout: return (1...86_400, " seconds")
        default: return nil
        }
    }

    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
    static let profiles = ["baseline", "main", "high"]
    /// x264's psychovisual tunes (at most one) and the two that combine with them.
    static let psyTunes = ["film", "animation", "grain", "stillimage", "psnr", "ssim"]
    static let speedTunes = ["fastdecode", "zerolatency"]
    /// The longest path the kernel takes (PATH_MAX includes the NUL) and the longest Unix socket path.
    static let maxPathBytes = Int(PATH_MAX) - 1
    static let maxSocketPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Range and shape checks that need no other key: nil when fine, else what to use instead.
    func problem(_ v: SettingValue) -> String? {
        func show(_ t: String) -> String { DaemonSettings.show(t) }
        if let (r, unit) = intRange {
            guard case let .int(i) = v else { return "expected an integer" }
            return r.contains(i) ? nil : "\(i) is out of range (use \(r.lowerBound) to \(r.upperBound)\(unit))"
        }
        if kind == .strings {
            guard case let .strings(a) = v else { return "expected an array of strings" }
            if let first = a.first, !first.hasPrefix("/") { return "the program \(show(first)) must be an absolute path (it is run without a shell)" }
            if let first = a.first, first.utf8.count > Self.maxPathBytes { return "the program's path is \(first.utf8.count) bytes, longer than a path can be (\(Self.maxPathBytes))" }
            return nil
        }
        // Every other key is a string (fps may have been written as an integer; it arrives as a string).
        guard case let .string(t) = v else { return kind == .stringOrInt ? "expected an integer or a string" : "expected a string" }
        if let c = t.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            return "\(show(t)) contains the control character U+\(String(c.value, radix: 16, uppercase: true).leftPadded(4)) (remove it)"
        }
        func oneOf(_ allowed: [String]) -> String? {
            allowed.contains(t) ? nil : "\(show(t)) is not one of \(allowed.joined(separator: ", "))"
        }
        func path(_ what: String, max: Int) -> String? {
            if t.isEmpty { return "must not be empty (give a \(what))" }
            if t.utf8.count > max { return "the \(what) is \(t.utf8.count) bytes; at most \(max) work (choose a shorter one)" }
            return nil
        }
        switch self {
        case .logLevel: return oneOf(Self.logLevels)
        case .profile: return oneOf(Self.profiles)
        case .fsync: return oneOf(FsyncPolicy.allCases.map(\.rawValue))
        case .preset: return oneOf(H264Encoder.presets)
        case .tune:
            guard !t.isEmpty else { return nil }
            let parts = t.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            let known = Self.psyTunes + Self.speedTunes
            if let bad = parts.first(where: { !known.contains($0) }) {
                return "\(show(bad)) is not an x264 tune (use one of \(known.joined(separator: ", ")), or several joined by commas, or \"\" for none)"
            }
            if parts.filter({ Self.psyTunes.contains($0) }).count > 1 || Set(parts).count != parts.count {
                return "\(show(t)) combines tunes x264 cannot (at most one of \(Self.psyTunes.joined(separator: ", ")), plus fastdecode and/or zerolatency)"
            }
            return nil
        case .pixelFormat:
            // One list of pixel formats: the camera's (it accepts "i420" for "yuv420").
            return CameraPixelFormat(name: t) != nil ? nil
                : "\(show(t)) is not one of \((CameraPixelFormat.allCases.map(\.rawValue) + ["i420"]).joined(separator: ", "))"
        case .size:
            let p = t.split(separator: "x", omittingEmptySubsequences: false)
            guard p.count == 2, let w = Int(p[0]), let h = Int(p[1]), w % 2 == 0, h % 2 == 0, (16...7680).contains(w), (16...4320).contains(h)
            else { return "\(show(t)) is not WxH with even numbers from 16x16 to 7680x4320, e.g. \"640x360\"" }
            return nil
        case .fps:
            // Bounds checked before multiplying, so no value can overflow.
            guard let r = Rational(parsing: t), r.den <= 1_000_000, r.num >= r.den, r.num <= 240 * r.den else {
                return "\(show(t)) is not N or N/D from 1 to 240, e.g. 30 or \"30000/1001\""
            }
            return nil
        case .socket: return path("socket path", max: Self.maxSocketPathBytes)
        case .outputDir: return path("directory", max: Self.maxPathBytes)
        case .video:
            let ok = t == "test" || t == "none" || (t.hasPrefix("y4m:") && t.count > 4)
                || ((t.hasPrefix("v4l2:/dev/") || t.hasPrefix("/dev/")) && !t.hasSuffix("/"))
            if ok, t.utf8.count <= Self.maxPathBytes { return nil }
            return "unsupported --video \(show(t)) (use a camera such as /dev/video0 or v4l2:/dev/video0, 'y4m:PATH', 'test' or 'none'; see 'reeld --list-devices')"
        case .audio:
            let ok = t == "test" || t == "none" || (t.hasPrefix("wav:") && t.count > 4) || (t.hasPrefix("alsa:") && t.count > 5)
            if ok, t.utf8.count <= Self.maxPathBytes { return nil }
            return "unsupported --audio \(show(t)) (use an ALSA device such as alsa:default or alsa:hw:1,0, 'wav:PATH', 'test' or 'none'; see 'reeld --list-devices')"
        case .controlGroup, .controlUser:
            // A user or group name as useradd/groupadd accept it; "" for none.
            let ok = t.utf8.count <= 32 && t.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "_.-$".unicodeScalars.contains($0)
            } && !t.hasPrefix("-")
            return ok ? nil : "\(show(t)) is not a \(self == .controlGroup ? "group" : "user") name (letters, digits, _ . -, at most 32; \"\" for none)"
        case .sampleRate, .channels, .crf, .bitrate, .keyint, .audioBitrate, .minFreeMB, .onFinishTimeout, .onFinish:
            return nil  // handled above
        }
    }
}

private extension String {
    func leftPadded(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
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
    /// Things that are not errors but probably mistakes (a REEL_ variable close to a setting's name).
    public private(set) var warnings: [String] = []

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
        let known = Set(SettingKey.allCases.map(\.environmentVariable) + ["REEL_CONFIG"])
        for name in environment.keys.sorted() where name.hasPrefix("REEL_") && !known.contains(name) && !name.hasPrefix("REEL_TEST_") {
            if let near = closest(to: String(name.dropFirst(5))) {
                s.warnings.append("environment variable \(show(name, quoted: false)) is not a reeld setting and is ignored (did you mean \(SettingKey(rawValue: near)!.environmentVariable)?)")
            }
        }
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
        let data: Data
        do {
            let h = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? h.close() }
            data = try h.readToEnd() ?? Data()
        } catch {
            let why = access(path, F_OK) != 0 ? "no such file" : access(path, R_OK) != 0 ? "permission denied" : "\(error.localizedDescription)"
            throw ConfigError("cannot read config file \(path): \(why) (check the path and its permissions, or pass --config)")
        }
        try apply(data: data, path: path)
    }

    /// Layers the contents of a config file (named `path` in messages) over these settings
    /// (public for the fuzzer, `make fuzz`).
    public mutating func apply(data: Data, path: String) throws(ConfigError) {
        let text = try Self.checkedText(data, path: path)
        filePath = path
        let lines = Self.lines(text)
        let table: TOMLDocument
        do { table = try TOMLDocument(parsing: text) }
        catch {
            let n = error.line
            let key = (1...lines.count).contains(n) ? Self.keyWritten(on: lines[n - 1]).map { "key '\(Self.show($0, quoted: false))': " } ?? "" : ""
            throw ConfigError("\(path):\(n): \(key)\(Self.show(error.description, max: 200, quoted: false)) (fix the TOML syntax; see the comments in the installed reeld.toml)")
        }
        // Checked in the order they are written, so the first mistake in the file is the one named.
        let keys = table.keys.map { ($0, table.line(of: $0)) }.sorted { ($0.1 ?? Int.max, $0.0) < ($1.1 ?? Int.max, $1.0) }
        for (key, line) in keys {
            let origin = SettingOrigin.file(path: path, line: line)
            let value = table[key]!
            guard let k = SettingKey(rawValue: key) else {
                // A known key under a [table] header: reeld.toml has no tables.
                if value.type == .table, let inner = value.tableKeys.sorted().first(where: { SettingKey(rawValue: $0) != nil }) {
                    throw ConfigError("\(origin): key '\(Self.show(key, quoted: false))': reeld.toml has no tables, so '\(inner)' under [\(Self.show(key, quoted: false))] is not read (move the settings above the first [table] line and remove the header)")
                }
                let hint = Self.closest(to: key).map { " (did you mean '\($0)'?)" } ?? ""
                throw ConfigError("\(origin): key '\(Self.show(key, quoted: false))': unknown key\(hint); the keys are documented in \(Self.defaultConfigPath)")
            }
            let v: SettingValue
            switch (k.kind, value.type) {
            case (.string, .string), (.stringOrInt, .string): v = .string(value.string!)
            case (.int, .int), (.stringOrInt, .int): v = k.kind == .int ? .int(value.int!) : .string(String(value.int!))
            case (.strings, .array):
                var items: [String] = []
                for item in value.array! {
                    guard let s = item.string else { throw ConfigError.at(origin, key: key, "expected an array of strings, found an array holding \(Self.typeName(item.type))") }
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
                var hint = ""
                if k == .fps, value.type == .double { hint = " (write a fractional rate as a string, e.g. \"30000/1001\" for 29.97)" }
                if k.kind == .int, value.type == .double { hint = " (write a whole number, e.g. \(Int(exactly: (value.double ?? 0).rounded()) ?? 0))" }
                if k.kind == .strings, value.type == .string { hint = " (write [\"/path/to/program\", \"arg\"], or [] for none)" }
                throw ConfigError.at(origin, key: key, "expected \(want), found \(Self.typeName(value.type))\(hint)")
            }
            try set(k, v, origin: origin)
        }
    }

    /// The file as text, or an error naming the line of the first byte that cannot be in a config
    /// file: invalid UTF-8, a NUL (a config file is text), or a \u0000 escape (a path or a name
    /// would end there). Then the lines `hazard` and `bracketHazard` refuse.
    static func checkedText(_ data: Data, path: String) throws(ConfigError) -> String {
        let bytes = [UInt8](data)
        func lineAt(_ offset: Int) -> Int { bytes[..<offset].reduce(1) { $1 == 0x0A ? $0 + 1 : $0 } }
        var parser = Unicode.UTF8.ForwardParser()
        var it = bytes.makeIterator()
        var offset = 0
        decoding: while true {
            switch parser.parseScalar(from: &it) {
            case let .valid(encoded): offset += encoded.count
            case .emptyInput: break decoding
            case .error:
                throw ConfigError("\(path):\(lineAt(offset)): byte 0x\(String(bytes[offset], radix: 16, uppercase: true)) is not UTF-8 text (save the file as UTF-8)")
            }
        }
        if let nul = bytes.firstIndex(of: 0) {
            throw ConfigError("\(path):\(lineAt(nul)): a NUL byte: a config file is text (is this a binary file?)")
        }
        let text = String(decoding: bytes, as: UTF8.self)
        for (i, line) in lines(text).enumerated() {
            let l = line.lowercased()
            if l.contains("\\u0000") || l.contains("\\u00000000") {
                throw ConfigError("\(path):\(i + 1): a \\u0000 escape: a NUL cannot be in a setting (remove it)")
            }
            if let why = hazard(line) { throw ConfigError("\(path):\(i + 1): \(why)") }
        }
        if let (line, why) = bracketHazard(text) { throw ConfigError("\(path):\(line): \(why)") }
        return text
    }

    /// A '}' where an array expects a value (`[}`, `[1, }`), on which toml++ 3 (TOMLKit, reeld's
    /// parser before TOMLDocument) aborted the process. TOMLDocument refuses it as well; this
    /// names the mismatch plainly. It follows the brackets of values through strings and comments
    /// and refuses a closing bracket that does not match the innermost open one (always a syntax
    /// error). Returns the line and why.
    static func bracketHazard(_ text: String) -> (Int, String)? {
        let s = Array(text.unicodeScalars)
        var stack: [Unicode.Scalar] = []
        var line = 1
        var i = 0
        var lineStart = true
        func starts(_ p: String, at k: Int) -> Bool {
            let q = Array(p.unicodeScalars)
            return k + q.count <= s.count && Array(s[k..<(k + q.count)]) == q
        }
        while i < s.count {
            let c = s[i]
            if c == "\n" { line += 1; lineStart = true; i += 1; continue }
            if c == " " || c == "\t" || c == "\r" { i += 1; continue }
            let atLineStart = lineStart
            lineStart = false
            if c == "#" {
                while i < s.count && s[i] != "\n" { i += 1 }
                continue
            }
            if atLineStart && stack.isEmpty && c == "[" {
                // A table header: skip its line (hazard() checked how it starts).
                while i < s.count && s[i] != "\n" && s[i] != "#" { i += 1 }
                continue
            }
            if c == "\"" || c == "'" {
                let multi = starts(c == "\"" ? "\"\"\"" : "'''", at: i)
                let delim = String(repeating: String(c), count: multi ? 3 : 1)
                i += delim.count
                while i < s.count {
                    if c == "\"" && s[i] == "\\" { i += 2; continue }
                    if s[i] == "\n" {
                        if !multi { break }  // an unterminated string: the parser says so
                        line += 1
                    }
                    if starts(delim, at: i) { i += delim.count; break }
                    i += 1
                }
                continue
            }
            switch c {
            case "[", "{": stack.append(c)
            case "]", "}":
                if let open = stack.last {
                    if (open == "[") != (c == "]") {
                        return (line, "'\(c)' closes the '\(open)' opened before it; brackets must pair up, [ with ] and { with }")
                    }
                    stack.removeLast()
                }
            default: break
            }
            i += 1
        }
        return nil
    }

    /// Lines that crashed toml++ 3 (TOMLKit, reeld's parser before TOMLDocument): a table header
    /// whose name starts with anything but a key character or a quote (`[[[`, `[=`, `[é]`, `[`
    /// alone on its line) tripped an assertion, and a key dotted hundreds of thousands of levels
    /// deep overflowed the stack. TOMLDocument refuses the first and reads the second without
    /// recursion; these say plainly that reeld.toml has no tables and no dotted keys.
    static func hazard(_ line: Substring) -> String? {
        let t = line.drop { $0 == " " || $0 == "\t" }
        if t.first == "[" {
            var rest = t.dropFirst()
            let double = rest.first == "["
            if double { rest = rest.dropFirst() }
            let spaced = rest.first == " " || rest.first == "\t"
            rest = rest.drop { $0 == " " || $0 == "\t" }
            let c = rest.unicodeScalars.first
            let fine = c.map {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "_-\"']".unicodeScalars.contains($0)
                    || ($0 == "[" && !double && spaced)
            } ?? false
            if !fine {
                return "\(show(String(t.prefix(8)))) does not start a table header ([name]); reeld.toml has no tables (remove the line)"
            }
        }
        // Dots outside quoted strings: a dotted key's depth (floats and dates have one or none).
        var dots = 0
        var quote: Character? = nil
        var escaped = false
        for ch in line {
            if let q = quote {
                if escaped { escaped = false } else if ch == "\\" && q == "\"" { escaped = true } else if ch == q { quote = nil }
            } else if ch == "\"" || ch == "'" { quote = ch }
            else if ch == "#" { break }
            else if ch == "." { dots += 1 }
        }
        if dots > 64 { return "a key nested \(dots) levels deep; reeld.toml's keys are plain names, e.g. crf = 20" }
        return nil
    }

    /// The lines of a file, LF or CRLF ("\r\n" is one Character in Swift, so splitting on "\n" alone
    /// would leave a CRLF file as one line).
    static func lines(_ text: String) -> [Substring] {
        text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
    }

    /// "a string", "an integer", "a boolean", ... for messages.
    static func typeName(_ t: TOMLDocument.ValueType) -> String {
        switch t {
        case .int: return "an integer"
        case .array: return "an array"
        case .table: return "a table"
        case .bool: return "a boolean"
        case .double: return "a floating-point number"
        case .dateTime: return "a date-time"
        case .string, .date, .time: return "a \(t.rawValue)"
        }
    }

    /// A value or key as messages show it: quoted, control characters escaped, cut to `max`
    /// characters (a 1 MB value must not make a 1 MB message).
    static func show(_ s: String, max: Int = 64, quoted: Bool = true) -> String {
        var out = ""
        var n = 0
        for c in s.unicodeScalars {
            if n == max { out += "... (\(s.unicodeScalars.count) characters)"; break }
            if c.value < 0x20 || c.value == 0x7f { out += c.escaped(asASCII: true) } else { out.unicodeScalars.append(c) }
            n += 1
        }
        return quoted ? "'\(out)'" : out
    }

    /// The top-level key a `key = value` line sets (the first part of a dotted key), for naming it
    /// in a syntax error on that line; nil for other lines.
    static func keyWritten(on line: Substring) -> String? {
        guard let eq = line.firstIndex(of: "=") else { return nil }
        let left = line[..<eq].trimmingCharacters(in: .whitespaces)
        if let q = left.first, q == "\"" || q == "'" {
            let rest = left.dropFirst()
            return rest.firstIndex(of: q).map { String(rest[..<$0]) }
        }
        let first = left.split(separator: ".", omittingEmptySubsequences: false).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        let bare = !first.isEmpty && first.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-"
        }
        return bare ? first : nil
    }

    /// The known key a mistyped one most likely meant: the same after lower-casing, '-' for '_'
    /// and dropping a REEL_ or -- prefix; else one within a small edit distance; else one
    /// sharing its first four characters.
    static func closest(to key: String) -> String? {
        var norm = key.lowercased().replacingOccurrences(of: "-", with: "_")
        for prefix in ["reel_", "__"] where norm.hasPrefix(prefix) { norm = String(norm.dropFirst(prefix.count)) }
        if SettingKey(rawValue: norm) != nil { return norm }
        guard norm.count <= 64 else { return nil }
        let names = SettingKey.allCases.map(\.rawValue)
        let scored = names.map { ($0, editDistance(norm, $0)) }.min { $0.1 < $1.1 }
        if let (name, d) = scored, d <= max(1, min(norm.count, name.count) / 3) { return name }
        guard norm.count >= 4 else { return nil }
        return names.first { $0.hasPrefix(norm.prefix(4)) }
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
