/// TOMLDocument's parser: one pass over the UTF-8 bytes (valid UTF-8, as `String` guarantees).
/// Here the characters and the document's structure (lines, headers, keys, arrays, inline
/// tables); the scalars (strings, numbers, dates) are in TOMLScalars.swift.
struct TOMLReader {
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
}
