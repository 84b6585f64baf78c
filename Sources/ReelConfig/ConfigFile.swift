import Foundation
import ReelCore

/// reeld.toml: its bytes as text, the text as TOML (`TOMLDocument`), the TOML as settings.
extension DaemonSettings {
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
            throw ConfigError("\(path):\(n): \(key)\(Self.show(error.description, max: 200, quoted: false)) (fix the TOML syntax; see the comments in the installed reeld.toml)",
                              origin: .file(path: path, line: n))
        }
        // Checked in the order they are written, so the first mistake in the file is the one named.
        for (key, value, line) in table.rootEntries {
            let origin = SettingOrigin.file(path: path, line: line)
            if key == Self.cameraTable {
                try applyCamera(table, origin: origin, path: path)
                continue
            }
            // [button] is reel-button's (Sources/ReelButton/ButtonConfig.swift), which checks it.
            if key == Self.buttonTable, table.isOpenTable(key) { continue }
            guard let k = SettingKey(rawValue: key) else {
                // A known key under a [table] header: reeld.toml has no tables.
                if value.type == .table, let inner = value.tableKeys.sorted().first(where: { SettingKey(rawValue: $0) != nil }) {
                    throw ConfigError.at(origin, key: Self.show(key, quoted: false), "reeld.toml has no tables, so '\(inner)' under [\(Self.show(key, quoted: false))] is not read (move the settings above the first [table] line and remove the header)")
                }
                let hint = Self.closest(to: key).map { " (did you mean '\($0.rawValue)'?)" } ?? ""
                throw ConfigError.at(origin, key: Self.show(key, quoted: false), "unknown key\(hint); the keys are documented in \(Self.defaultConfigPath)")
            }
            try set(k, try Self.written(value, for: k, origin: origin), origin: origin)
        }
    }

    /// A TOML value as a value of `k` as written: of the TOML type `k` takes (an integer for
    /// a string key that takes integers too, as its text), else an error naming the type found.
    static func written(_ value: TOMLDocument.Value, for k: SettingKey, origin: SettingOrigin) throws(ConfigError) -> SettingValue {
        let key = k.rawValue
        switch k.kind {
        case .string: if let s = value.string { return .string(s) }
        case .stringOrInt:
            if let s = value.string { return .string(s) }
            if let i = value.int { return .string(String(i)) }
        case .int: if let i = value.int { return .int(i) }
        case .bool: if let b = value.bool { return .bool(b) }
        case .strings:
            guard let items = value.array else { break }
            var strings: [String] = []
            for item in items {
                guard let s = item.string else { throw ConfigError.at(origin, key: key, "expected an array of strings, found an array holding \(Self.typeName(item.type))") }
                strings.append(s)
            }
            return .strings(strings)
        }
        let want: String
        switch k.kind {
        case .string: want = "a string (in quotes)"
        case .int: want = "an integer (no quotes)"
        case .stringOrInt: want = k == .maxDuration ? "an integer or a string (seconds with decimals go in quotes: \"2.5\")" : "an integer or a string"
        case .strings: want = "an array of strings"
        case .bool: want = "true or false (no quotes)"
        }
        var hint = ""
        if k == .fps, value.type == .double { hint = " (write a fractional rate as a string, e.g. \"30000/1001\" for 29.97)" }
        if k.kind == .int, value.type == .double { hint = " (write a whole number, e.g. \(Int(exactly: (value.double ?? 0).rounded()) ?? 0))" }
        if k.kind == .strings, value.type == .string { hint = " (write [\"/path/to/program\", \"arg\"], or [] for none)" }
        throw ConfigError.at(origin, key: key, "expected \(want), found \(Self.typeName(value.type))\(hint)")
    }

    static let cameraTable = "camera"
    static let buttonTable = "button"

    /// `[camera.controls]`: one `NAME = VALUE` per control, NAME as v4l2-ctl spells it, VALUE an
    /// integer, true/false or a string (a menu entry's name). Nothing else may be under `camera`.
    mutating func applyCamera(_ table: TOMLDocument, origin: SettingOrigin, path: String) throws(ConfigError) {
        let fix = "write camera controls under a [camera.controls] header, one NAME = VALUE per line, e.g. brightness = 140"
        guard table.isOpenTable(Self.cameraTable) else {
            let found = table[Self.cameraTable].map { Self.typeName($0.type) } ?? "nothing"
            throw ConfigError.at(origin, key: Self.cameraTable, "expected a [camera.controls] table, found \(found) (\(fix))")
        }
        var seen: [String: Int] = [:]
        var found: [CameraControlAssignment] = []
        for e in table.tableEntries where e.table.first == Self.cameraTable {
            let full = e.table + e.key
            let at = SettingOrigin.file(path: path, line: e.line)
            let shown = full.joined(separator: ".")
            guard full.count == 3, full[1] == "controls" else {
                throw ConfigError.at(at, key: Self.show(shown, quoted: false), "not read: under [camera] only [camera.controls] is (\(fix))")
            }
            let name = full[2]
            let key = "camera.controls.\(Self.show(name, quoted: false))"
            guard CameraControls.isWellFormedName(name) else {
                let want = CameraControls.name(name)
                let hint = want.isEmpty ? "" : " (did you mean '\(want)'?)"
                throw ConfigError.at(at, key: key, "\(Self.show(name)) is not a control name as 'reelctl controls' (and v4l2-ctl) spell them: lowercase letters, digits and single '_'\(hint)")
            }
            if let first = seen[name] {
                throw ConfigError.at(at, key: key, "set twice, first on line \(first) (keep one)")
            }
            seen[name] = e.line
            let input: CameraControlInput
            if let i = e.value.int { input = .int(Int64(i)) }
            else if let b = e.value.bool { input = .bool(b) }
            else if let t = e.value.string {
                if t.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
                    throw ConfigError.at(at, key: key, "\(Self.show(t)) contains a control character (remove it)")
                }
                input = .text(t)
            } else {
                var hint = ""
                if e.value.type == .double { hint = " (controls take whole numbers, e.g. \(Int(exactly: (e.value.double ?? 0).rounded()) ?? 0))" }
                throw ConfigError.at(at, key: key, "expected an integer, true/false or a string (a menu entry), found \(Self.typeName(e.value.type))\(hint)")
            }
            found.append(CameraControlAssignment(name: name, input: input, origin: "\(at): [camera.controls] \(name)"))
        }
        cameraControls = found
    }

    /// The file as text, or an error naming the line of the first byte that cannot be in a config
    /// file: invalid UTF-8, a NUL (a config file is text), or a \u0000 escape (a path or a name
    /// would end there). What is not TOML is TOMLDocument's to refuse.
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
                throw ConfigError("\(path):\(lineAt(offset)): byte 0x\(String(bytes[offset], radix: 16, uppercase: true)) is not UTF-8 text (save the file as UTF-8)",
                                  origin: .file(path: path, line: lineAt(offset)))
            }
        }
        if let nul = bytes.firstIndex(of: 0) {
            throw ConfigError("\(path):\(lineAt(nul)): a NUL byte: a config file is text (is this a binary file?)", origin: .file(path: path, line: lineAt(nul)))
        }
        let text = String(decoding: bytes, as: UTF8.self)
        for (i, line) in lines(text).enumerated() {
            let l = line.lowercased()
            if l.contains("\\u0000") || l.contains("\\u00000000") {
                throw ConfigError("\(path):\(i + 1): a \\u0000 escape: a NUL cannot be in a setting (remove it)", origin: .file(path: path, line: i + 1))
            }
        }
        return text
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
}
