/// TOMLReader's scalars: strings with their escapes, integers, floats, dates and times.
extension TOMLReader {
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
