/// reeld.toml as read by a TOML 1.0 reader written in Swift, so that no file can take reeld down.
///
/// reeld used TOMLKit 0.6, whose toml++ 3.4.0 aborts the process (a failed `assert`: SwiftPM
/// builds it without NDEBUG) on some malformed files, e.g. `[[[a]]]`, `a = [[}` or
/// `t = 1979-05-27T%07:32:00Z` (found by `make fuzz`), also on a SIGHUP reload in the middle of a
/// recording; it also never freed a parsed table, and cut keys at a `\u0000`.
///
/// The whole TOML syntax is read and checked, but only the root table and the plain values set
/// inside tables (`tableEntries`, for `[camera.controls]`) are kept: reeld.toml holds strings,
/// integers, booleans and arrays of strings; anything else (a float, a date, ...) is only
/// recognised, so that the error can name what was found. Inside a table only the syntax is
/// checked; reeld refuses any table but `[camera.controls]`, as an unknown key or a value of the wrong type.
public struct TOMLDocument: Sendable {
    /// A value's TOML type, named as TOML (and TOMLKit) name it in messages.
    public enum ValueType: String, Sendable, CustomStringConvertible {
        case table, array, string, int, double, bool, date, time, dateTime

        public var description: String {
            switch self {
            case .int: return "integer"
            case .double: return "floating-point number"
            case .dateTime: return "date-time"
            default: return rawValue
            }
        }
    }

    /// A value of the root table: its type, and its content for the types reeld reads.
    public struct Value: Sendable, Equatable {
        public var type: ValueType
        /// The text of a string.
        public var string: String?
        /// The value of an integer.
        public var int: Int?
        /// The value of a boolean.
        public var bool: Bool?
        /// The value of a float (for a hint such as "write a whole number, e.g. 8").
        public var double: Double?
        /// The elements of an array (tables inside are `.table` without content).
        public var array: [Value]?
        /// A table's own keys (not its sub-tables' keys), for "'crf' under [encoder] is not read".
        public var tableKeys: [String] = []

        init(_ type: ValueType, string: String? = nil, int: Int? = nil, double: Double? = nil, array: [Value]? = nil,
             tableKeys: [String] = []) {
            self.type = type
            self.string = string
            self.int = int
            self.double = double
            self.array = array
            self.tableKeys = tableKeys
        }
    }

    /// Malformed TOML: the 1-based line and what is wrong there.
    public struct SyntaxError: Error, Sendable, CustomStringConvertible {
        public var line: Int
        public var description: String
    }

    /// The root table's keys, in the order they first appear.
    public private(set) var keys: [String] = []
    /// Every `key = value` inside a table, in file order: its table's path (from the
    /// `[a.b]` header, or the first parts of a dotted key at the root), its own key path and line.
    /// For `[camera.controls]`, the one table reeld.toml has.
    public private(set) var tableEntries: [TableEntry] = []

    public struct TableEntry: Sendable, Equatable {
        public var table: [String]
        public var key: [String]
        public var value: Value
        public var line: Int
    }
    private var entries: [String: Entry] = [:]

    private struct Entry: Sendable {
        var value: Value
        var line: Int
        /// A table made by a `[header]` or a dotted key, which later headers and dotted keys may extend.
        var openTable = false
        /// An array made by `[[header]]`, which later `[[header]]`s extend.
        var tableArray = false
    }

    public subscript(key: String) -> Value? { entries[key]?.value }

    /// Whether root `key` is a table opened by a `[key...]` header or a dotted key (whose
    /// entries are in `tableEntries`), not an inline `{...}` value or an array of tables.
    public func isOpenTable(_ key: String) -> Bool { entries[key]?.openTable ?? false }

    /// The line where `key` is first defined (its `key = ...`, `key.x = ...` or `[key...]`).
    public func line(of key: String) -> Int? { entries[key]?.line }

    /// A byte order mark at the start of `text` is skipped (as toml++ did); any other U+FEFF is
    /// a syntax error.
    public init(parsing text: String) throws(SyntaxError) {
        var reader = Reader(Array(text.utf8))
        try reader.document(into: &self)
    }

    fileprivate mutating func addTableEntry(table: [String], key: [String], value: Value, line: Int) {
        tableEntries.append(TableEntry(table: table, key: key, value: value, line: line))
    }

    /// Records `inner` as one of root table `key`'s own keys.
    fileprivate mutating func addTableKey(_ key: String, _ inner: String) {
        guard entries[key]?.value.type == .table, !entries[key]!.value.tableKeys.contains(inner) else { return }
        entries[key]!.value.tableKeys.append(inner)
    }

    /// Defines root `key` (a whole key path at the root, or the first part of a dotted key or a
    /// header), refusing what TOML forbids at the root: a key set twice, or a value extended as a
    /// table.
    fileprivate mutating func define(_ path: [String], _ value: Value?, arrayHeader: Bool, line: Int) -> String? {
        let key = path[0]
        let whole = path.count == 1
        guard let existing = entries[key] else {
            var entry: Entry
            if whole, arrayHeader {
                entry = Entry(value: Value(.array, array: [Value(.table)]), line: line, tableArray: true)
            } else if whole, let value {
                entry = Entry(value: value, line: line)
            } else {
                entry = Entry(value: Value(.table), line: line, openTable: true)
            }
            keys.append(key)
            entries[key] = entry
            return nil
        }
        let again = "key '\(key)' is already defined on line \(existing.line) (define each key once)"
        if whole, arrayHeader {
            guard existing.tableArray else { return again }
            entries[key]!.value.array!.append(Value(.table))
            return nil
        }
        if whole, value != nil { return again }
        // A header [key] or [key.x...], or a dotted key key.x = ...: only into an open table, or
        // into the last table of a [[key]] array (not as a plain [key] header).
        if existing.openTable { return nil }
        if existing.tableArray, !whole { return nil }
        return again
    }
}

/// The parser: one pass over the UTF-8 bytes (valid UTF-8, as `String` guarantees).
private struct Reader {
    let b: [UInt8]
    var i = 0
    /// Positions of the line feeds, for line numbers.
    let lineFeeds: [Int]
    static let maxDepth = 64

    init(_ bytes: [UInt8]) {
        b = bytes
        lineFeeds = bytes.indices.filter { bytes[$0] == 0x0A }
    }

    // MARK: characters

    var atEnd: Bool { i >= b.count }
    func peek(_ offset: Int = 0) -> UInt8? { i + offset < b.count ? b[i + offset] : nil }
    func at(_ text: String) -> Bool {
        let t = Array(text.utf8)
        return i + t.count <= b.count && b[i..<(i + t.count)].elementsEqual(t)
    }

    func line(at position: Int) -> Int {
        var lo = 0, hi = lineFeeds.count  // the number of line feeds before `position`
        while lo < hi {
            let mid = (lo + hi) / 2
            if lineFeeds[mid] < position { lo = mid + 1 } else { hi = mid }
        }
        return lo + 1
    }

    func fail(_ what: String, at position: Int? = nil) -> TOMLDocument.SyntaxError {
        TOMLDocument.SyntaxError(line: line(at: min(position ?? i, b.count)), description: what)
    }

    /// The character at `i` as written in a message.
    var found: String {
        guard let c = peek() else { return "the end of the file" }
        switch c {
        case 0x0A: return "the end of the line"
        case 0x0D: return "a carriage return"
        case 0x09: return "a tab"
        case 0x20: return "a space"
        case 0x21..<0x7F: return "'\(Character(Unicode.Scalar(c)))'"
        case 0x80...: // the whole UTF-8 sequence
            var end = i + 1
            while end < b.count, b[end] & 0xC0 == 0x80 { end += 1 }
            return "'\(String(decoding: b[i..<end], as: UTF8.self))'"
        default:
            let hex = String(c, radix: 16, uppercase: true)
            return "the control character U+\(String(repeating: "0", count: 4 - hex.count))\(hex)"
        }
    }

    static func isBareKey(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"): return true
        default: return false
        }
    }
    static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
    /// A control character TOML allows nowhere outside escapes (tab is allowed).
    static func isControl(_ c: UInt8) -> Bool { (c < 0x20 && c != 0x09) || c == 0x7F }

    mutating func skipBlanks() { while let c = peek(), c == 0x20 || c == 0x09 { i += 1 } }

    /// A line break (LF or CRLF) at `i`, consumed; false if there is none. A lone CR is an error.
    mutating func newline() throws(TOMLDocument.SyntaxError) -> Bool {
        if peek() == 0x0A { i += 1; return true }
        if peek() == 0x0D {
            guard peek(1) == 0x0A else { throw fail("a carriage return must be followed by a line feed (save the file with LF or CRLF line ends)") }
            i += 2
            return true
        }
        return false
    }

    /// A comment from `#` to the end of the line (the line break is left).
    mutating func comment() throws(TOMLDocument.SyntaxError) {
        i += 1
        while let c = peek(), c != 0x0A {
            if c == 0x0D, peek(1) == 0x0A { return }
            if Self.isControl(c) { throw fail("\(found) in a comment (delete it)") }
            i += 1
        }
    }

    /// Blanks, comments and line breaks, as allowed between the elements of an array.
    mutating func skipBlanksCommentsAndNewlines() throws(TOMLDocument.SyntaxError) {
        while true {
            skipBlanks()
            if peek() == UInt8(ascii: "#") { try comment() }
            if try !newline() { return }
        }
    }

    // MARK: document

    mutating func document(into doc: inout TOMLDocument) throws(TOMLDocument.SyntaxError) {
        if at("\u{FEFF}") { i += 3 }  // a byte order mark
        var atRoot = true
        /// Under a `[key]` header: the root table whose own keys the following lines set.
        var section: String?
        /// Under any `[a.b]` header (not `[[a]]`): its path.
        var headerPath: [String]?
        while !atEnd {
            skipBlanks()
            let start = i
            switch peek() {
            case nil: return
            case UInt8(ascii: "#"): try comment()
            case 0x0A, 0x0D: break
            case UInt8(ascii: "["):
                let (path, isArray) = try header()
                if let problem = doc.define(path, nil, arrayHeader: isArray, line: line(at: start)) { throw fail(problem, at: start) }
                if path.count > 1 { doc.addTableKey(path[0], path[1]) }
                atRoot = false
                section = path.count == 1 && !isArray ? path[0] : nil
                headerPath = isArray ? nil : path
            default:
                let (path, value) = try keyValue(depth: 0)
                if atRoot {
                    if let problem = doc.define(path, value, arrayHeader: false, line: line(at: start)) { throw fail(problem, at: start) }
                    if path.count > 1 {
                        doc.addTableKey(path[0], path[1])
                        doc.addTableEntry(table: Array(path.dropLast()), key: [path.last!], value: value, line: line(at: start))
                    }
                } else {
                    if let section { doc.addTableKey(section, path[0]) }
                    if let headerPath { doc.addTableEntry(table: headerPath, key: path, value: value, line: line(at: start)) }
                }
            }
            skipBlanks()
            if peek() == UInt8(ascii: "#") { try comment() }
            if atEnd { return }
            guard try newline() else { throw fail("expected the end of the line, found \(found) (one key = value per line)") }
        }
    }

    /// `[a.b]` or `[[a.b]]`: the key path and whether it is an array of tables.
    mutating func header() throws(TOMLDocument.SyntaxError) -> ([String], Bool) {
        i += 1
        let isArray = peek() == UInt8(ascii: "[")
        if isArray { i += 1 }
        skipBlanks()
        let path = try key()
        skipBlanks()
        guard peek() == UInt8(ascii: "]") else { throw fail("expected ']' to close the table header, found \(found)") }
        i += 1
        if isArray {
            guard peek() == UInt8(ascii: "]") else { throw fail("expected ']]' to close the array-of-tables header, found \(found)") }
            i += 1
        }
        return (path, isArray)
    }

    /// `key = value`: the key path and the value.
    mutating func keyValue(depth: Int) throws(TOMLDocument.SyntaxError) -> ([String], TOMLDocument.Value) {
        let path = try key()
        skipBlanks()
        guard peek() == UInt8(ascii: "=") else {
            throw fail("expected '=' after the key '\(path.joined(separator: "."))', found \(found) (write key = value)")
        }
        i += 1
        skipBlanks()
        return (path, try value(depth: depth))
    }

    /// A key: bare, "quoted" or 'literal' parts joined by dots.
    mutating func key() throws(TOMLDocument.SyntaxError) -> [String] {
        var parts: [String] = []
        while true {
            guard let c = peek() else { throw fail("expected a key, found the end of the file") }
            if Self.isBareKey(c) {
                let start = i
                while let c = peek(), Self.isBareKey(c) { i += 1 }
                parts.append(String(decoding: b[start..<i], as: UTF8.self))
            } else if c == UInt8(ascii: "\"") {
                if at("\"\"\"") { throw fail("a key cannot be a multi-line string") }
                parts.append(try basicString())
            } else if c == UInt8(ascii: "'") {
                if at("'''") { throw fail("a key cannot be a multi-line string") }
                parts.append(try literalString())
            } else {
                throw fail("expected a key (letters, digits, '_' and '-', or a quoted string), found \(found)")
            }
            let afterPart = i
            skipBlanks()
            guard peek() == UInt8(ascii: ".") else { i = afterPart; return parts }
            i += 1
            skipBlanks()
        }
    }

    // MARK: values

    mutating func value(depth: Int) throws(TOMLDocument.SyntaxError) -> TOMLDocument.Value {
        guard depth < Self.maxDepth else { throw fail("arrays and inline tables nested more than \(Self.maxDepth) deep") }
        guard let c = peek() else { throw fail("expected a value, found the end of the file") }
        switch c {
        case UInt8(ascii: "\""):
            return TOMLDocument.Value(.string, string: at("\"\"\"") ? try multiLineBasicString() : try basicString())
        case UInt8(ascii: "'"):
            return TOMLDocument.Value(.string, string: at("'''") ? try multiLineLiteralString() : try literalString())
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "{"): return try inlineTable(depth: depth)
        case UInt8(ascii: "t") where at("true"), UInt8(ascii: "f") where at("false"):
            i += c == UInt8(ascii: "t") ? 4 : 5
            var v = TOMLDocument.Value(.bool)
            v.bool = c == UInt8(ascii: "t")
            return v
        case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "i"), UInt8(ascii: "n"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try numberOrDate()
        default:
            throw fail("expected a value (a \"string\", a number, true/false, a date, [an array] or {a table}), found \(found)")
        }
    }

    mutating func array(depth: Int) throws(TOMLDocument.SyntaxError) -> TOMLDocument.Value {
        let open = i
        i += 1
        var items: [TOMLDocument.Value] = []
        while true {
            try skipBlanksCommentsAndNewlines()
            if peek() == UInt8(ascii: "]") { i += 1; break }
            if atEnd { throw fail("the array opened here is not closed with ']'", at: open) }
            items.append(try value(depth: depth + 1))
            try skipBlanksCommentsAndNewlines()
            if peek() == UInt8(ascii: ",") { i += 1; continue }
            if peek() == UInt8(ascii: "]") { i += 1; break }
            if atEnd { throw fail("the array opened here is not closed with ']'", at: open) }
            throw fail("expected ',' or ']' in the array, found \(found)")
        }
        return TOMLDocument.Value(.array, array: items)
    }

    /// `{ a = 1, b.c = "x" }`, all on one line; only its syntax and own keys are kept.
    mutating func inlineTable(depth: Int) throws(TOMLDocument.SyntaxError) -> TOMLDocument.Value {
        i += 1
        skipBlanks()
        if peek() == UInt8(ascii: "}") { i += 1; return TOMLDocument.Value(.table) }
        var keys: [String] = []
        while true {
            let (path, _) = try keyValue(depth: depth + 1)
            if !keys.contains(path[0]) { keys.append(path[0]) }
            skipBlanks()
            if peek() == UInt8(ascii: "}") { i += 1; return TOMLDocument.Value(.table, tableKeys: keys) }
            guard peek() == UInt8(ascii: ",") else {
                throw fail("expected ',' or '}' in the inline table, found \(found) (an inline table is on one line)")
            }
            i += 1
            skipBlanks()
            if peek() == UInt8(ascii: "}") { throw fail("an inline table cannot end with ','") }
        }
    }

    // MARK: strings

    /// `"..."` on one line, with escapes.
    mutating func basicString() throws(TOMLDocument.SyntaxError) -> String {
        i += 1
        var out: [UInt8] = []
        while true {
            guard let c = peek(), c != 0x0A, c != 0x0D || peek(1) != 0x0A else {
                throw fail("the string is not closed with '\"' on its line")
            }
            if c == UInt8(ascii: "\"") { i += 1; break }
            if c == UInt8(ascii: "\\") { try escape(into: &out); continue }
            if Self.isControl(c) { throw fail("\(found) in a string (write it as an escape such as \\t or \\u0001)") }
            out.append(c)
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `"""..."""`: the line break right after the opening quotes is dropped, a `\` at the end of
    /// a line drops the break and the blanks after it; up to two `"` may precede the closing ones.
    mutating func multiLineBasicString() throws(TOMLDocument.SyntaxError) -> String {
        let open = i
        i += 3
        _ = try newline()
        var out: [UInt8] = []
        while true {
            guard let c = peek() else { throw fail("the multi-line string opened here is not closed with '\"\"\"'", at: open) }
            if c == UInt8(ascii: "\"") {
                var run = 0
                while peek(run) == UInt8(ascii: "\"") { run += 1 }
                if run >= 3 {
                    guard run <= 5 else { throw fail("too many '\"' at the end of a multi-line string (escape them as \\\")") }
                    out += Array(repeating: UInt8(ascii: "\""), count: run - 3)
                    i += run
                    break
                }
                out += Array(repeating: UInt8(ascii: "\""), count: run)
                i += run
                continue
            }
            if c == UInt8(ascii: "\\") {
                // A line-ending backslash: blanks, the line break, then every blank and break.
                var j = i + 1
                while j < b.count, b[j] == 0x20 || b[j] == 0x09 { j += 1 }
                if j < b.count, b[j] == 0x0A || (b[j] == 0x0D && j + 1 < b.count && b[j + 1] == 0x0A) {
                    i = j
                    while true {
                        skipBlanks()
                        if try !newline() { break }
                    }
                    continue
                }
                try escape(into: &out)
                continue
            }
            if try newline() { out.append(0x0A); continue }
            if Self.isControl(c) { throw fail("\(found) in a string (write it as an escape such as \\t or \\u0001)") }
            out.append(c)
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `'...'` on one line, no escapes.
    mutating func literalString() throws(TOMLDocument.SyntaxError) -> String {
        i += 1
        let start = i
        while true {
            guard let c = peek(), c != 0x0A, c != 0x0D || peek(1) != 0x0A else {
                throw fail("the string is not closed with \"'\" on its line")
            }
            if c == UInt8(ascii: "'") { break }
            if Self.isControl(c) { throw fail("\(found) in a string (use a \"basic string\" with an escape)") }
            i += 1
        }
        defer { i += 1 }
        return String(decoding: b[start..<i], as: UTF8.self)
    }

    /// `'''...'''`: the line break right after the opening quotes is dropped; no escapes.
    mutating func multiLineLiteralString() throws(TOMLDocument.SyntaxError) -> String {
        let open = i
        i += 3
        _ = try newline()
        var out: [UInt8] = []
        while true {
            guard let c = peek() else { throw fail("the multi-line string opened here is not closed with \"'''\"", at: open) }
            if c == UInt8(ascii: "'") {
                var run = 0
                while peek(run) == UInt8(ascii: "'") { run += 1 }
                if run >= 3 {
                    guard run <= 5 else { throw fail("too many \"'\" at the end of a multi-line literal string") }
                    out += Array(repeating: UInt8(ascii: "'"), count: run - 3)
                    i += run
                    break
                }
                out += Array(repeating: UInt8(ascii: "'"), count: run)
                i += run
                continue
            }
            if try newline() { out.append(0x0A); continue }
            if Self.isControl(c) { throw fail("\(found) in a string (use a \"basic string\" with an escape)") }
            out.append(c)
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// An escape at `i` (the backslash), appended as UTF-8.
    mutating func escape(into out: inout [UInt8]) throws(TOMLDocument.SyntaxError) {
        let start = i
        i += 1
        guard let c = peek() else { throw fail("a string ends in '\\'") }
        i += 1
        switch c {
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
        case UInt8(ascii: "u"), UInt8(ascii: "U"):
            let count = c == UInt8(ascii: "u") ? 4 : 8
            var scalar: UInt32 = 0
            for _ in 0..<count {
                guard let h = peek(), let digit = Self.hexValue(h) else {
                    throw fail("\\\(Character(Unicode.Scalar(c))) needs \(count) hexadecimal digits", at: start)
                }
                scalar = scalar << 4 | UInt32(digit)
                i += 1
            }
            guard let u = Unicode.Scalar(scalar) else {
                throw fail("\(String(decoding: b[start..<i], as: UTF8.self)) is not a Unicode scalar value", at: start)
            }
            out += Array(String(Character(u)).utf8)
        default:
            i = start + 1
            let what = (0x21..<0x7F).contains(c) ? "unknown escape '\\\(Character(Unicode.Scalar(c)))'" : "'\\' followed by \(found)"
            throw fail("\(what) in a string (the escapes are \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX; write \\\\ for a backslash)", at: start)
        }
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    // MARK: numbers and dates

    /// An integer, a float (also inf and nan), or a date and/or time.
    mutating func numberOrDate() throws(TOMLDocument.SyntaxError) -> TOMLDocument.Value {
        let start = i
        func isTokenByte(_ c: UInt8) -> Bool {
            Self.isBareKey(c) || c == UInt8(ascii: "+") || c == UInt8(ascii: ".") || c == UInt8(ascii: ":")
        }
        while let c = peek(), isTokenByte(c) { i += 1 }
        // A date and a time may be separated by a space: 1979-05-27 07:32:00.
        if i - start == 10, b[start + 4] == UInt8(ascii: "-"), peek() == 0x20,
           let h1 = peek(1), let h2 = peek(2), peek(3) == UInt8(ascii: ":"), Self.isDigit(h1), Self.isDigit(h2) {
            i += 1
            while let c = peek(), isTokenByte(c) { i += 1 }
        }
        let token = Array(b[start..<i])
        let text = String(decoding: token, as: UTF8.self)
        if token.count >= 5, token[0...3].allSatisfy(Self.isDigit), token[4] == UInt8(ascii: "-") {
            guard let type = Self.dateTimeType(token) else {
                throw fail("'\(text)' is not a date or date-time such as 1979-05-27 or 1979-05-27T07:32:00Z", at: start)
            }
            return TOMLDocument.Value(type)
        }
        if token.count >= 3, Self.isDigit(token[0]), Self.isDigit(token[1]), token[2] == UInt8(ascii: ":") {
            guard Self.time(token[...]) == token.count else {
                throw fail("'\(text)' is not a time such as 07:32:00", at: start)
            }
            return TOMLDocument.Value(.time)
        }
        if let value = try integer(token, text: text, at: start) { return TOMLDocument.Value(.int, int: value) }
        if Self.isFloat(token) {
            let plain = String(decoding: token.filter { $0 != UInt8(ascii: "_") }, as: UTF8.self)
            return TOMLDocument.Value(.double, double: Double(plain))
        }
        throw fail("'\(text)' is not a number (integers look like 42, -7, 1_000 or 0xff; no leading zeros)", at: start)
    }

    /// The integer `token` stands for, nil if it is not an integer; an error if it is one out of range.
    func integer(_ token: [UInt8], text: String, at start: Int) throws(TOMLDocument.SyntaxError) -> Int? {
        var digits = token[...]
        var radix = 10
        if token.count > 2, token[0] == UInt8(ascii: "0") {
            switch token[1] {
            case UInt8(ascii: "x"): radix = 16
            case UInt8(ascii: "o"): radix = 8
            case UInt8(ascii: "b"): radix = 2
            default: break
            }
            if radix != 10 { digits = token[2...] }
        }
        var sign: UInt8?
        if radix == 10, let first = digits.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") {
            sign = first
            digits = digits.dropFirst()
        }
        guard Self.isDigitRun(digits, radix: radix) else { return nil }
        if radix == 10, digits.count > 1, digits.first == UInt8(ascii: "0") { return nil }  // leading zero
        var plain = String(decoding: digits.filter { $0 != UInt8(ascii: "_") }, as: UTF8.self)
        if sign == UInt8(ascii: "-") { plain = "-" + plain }
        guard let value = Int64(plain, radix: radix) else {
            throw fail("the integer \(text) is out of range (\(Int64.min) to \(Int64.max))", at: start)
        }
        return Int(value)
    }

    /// Digits of `radix`, with single underscores only between digits.
    static func isDigitRun(_ s: ArraySlice<UInt8>, radix: Int) -> Bool {
        guard let first = s.first, let last = s.last, first != UInt8(ascii: "_"), last != UInt8(ascii: "_") else { return false }
        var previousUnderscore = false
        for c in s {
            if c == UInt8(ascii: "_") {
                if previousUnderscore { return false }
                previousUnderscore = true
                continue
            }
            previousUnderscore = false
            guard let v = hexValue(c), Int(v) < radix else { return false }
        }
        return true
    }

    /// TOML's float: [+-](inf|nan), or a decimal integer part with a fraction and/or an exponent.
    static func isFloat(_ token: [UInt8]) -> Bool {
        var s = token[...]
        if let first = s.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") { s = s.dropFirst() }
        if s.elementsEqual("inf".utf8) || s.elementsEqual("nan".utf8) { return true }
        let exponentAt = s.firstIndex { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }
        let mantissa = exponentAt.map { s[..<$0] } ?? s
        let dot = mantissa.firstIndex(of: UInt8(ascii: "."))
        let integerPart = dot.map { mantissa[..<$0] } ?? mantissa
        guard isDigitRun(integerPart, radix: 10), integerPart.count == 1 || integerPart.first != UInt8(ascii: "0") else { return false }
        if let dot, !isDigitRun(mantissa[(dot + 1)...], radix: 10) { return false }
        if let e = exponentAt {
            var exponent = s[(e + 1)...]
            if let first = exponent.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") { exponent = exponent.dropFirst() }
            guard isDigitRun(exponent, radix: 10) else { return false }
        }
        return dot != nil || exponentAt != nil
    }

    /// `.date`, `.dateTime` (local or with an offset), or nil if `token` is neither.
    static func dateTimeType(_ token: [UInt8]) -> TOMLDocument.ValueType? {
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= token.count, token[range].allSatisfy(isDigit) else { return nil }
            return token[range].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        }
        guard token.count >= 10, let year = number(0..<4), token[4] == UInt8(ascii: "-"), let month = number(5..<7),
              token[7] == UInt8(ascii: "-"), let day = number(8..<10), (1...12).contains(month) else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard (1...days).contains(day) else { return nil }
        if token.count == 10 { return .date }
        guard [UInt8(ascii: "T"), UInt8(ascii: "t"), 0x20].contains(token[10]) else { return nil }
        let timeEnd = time(token[11...])
        guard timeEnd > 11 else { return nil }
        if timeEnd == token.count { return .dateTime }
        let offset = token[timeEnd...]
        if offset.count == 1, offset.first == UInt8(ascii: "Z") || offset.first == UInt8(ascii: "z") { return .dateTime }
        guard offset.count == 6, offset.first == UInt8(ascii: "+") || offset.first == UInt8(ascii: "-"),
              let h = number((timeEnd + 1)..<(timeEnd + 3)), token[timeEnd + 3] == UInt8(ascii: ":"),
              let m = number((timeEnd + 4)..<(timeEnd + 6)), h < 24, m < 60 else { return nil }
        return .dateTime
    }

    /// Where `HH:MM:SS[.fraction]` at the start of `s` ends (an index of `s`'s base), or
    /// `s.startIndex` if it is not there.
    static func time(_ s: ArraySlice<UInt8>) -> Int {
        let o = s.startIndex
        func number(_ at: Int) -> Int? {
            guard at + 2 <= s.endIndex, isDigit(s[at]), isDigit(s[at + 1]) else { return nil }
            return Int(s[at] - UInt8(ascii: "0")) * 10 + Int(s[at + 1] - UInt8(ascii: "0"))
        }
        guard let h = number(o), o + 2 < s.endIndex, s[o + 2] == UInt8(ascii: ":"), let m = number(o + 3),
              o + 5 < s.endIndex, s[o + 5] == UInt8(ascii: ":"), let sec = number(o + 6), h < 24, m < 60, sec <= 60 else { return o }
        var end = o + 8
        if end < s.endIndex, s[end] == UInt8(ascii: ".") {
            var j = end + 1
            while j < s.endIndex, isDigit(s[j]) { j += 1 }
            guard j > end + 1 else { return o }
            end = j
        }
        return end
    }
}
