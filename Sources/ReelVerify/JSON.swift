import ReelCore

/// A small ordered JSON value and writer (keys keep the order they are given in, numbers print
/// the shortest round-tripping form), so `reelctl verify --json` reads like the oracle's output.
public indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (a: JSON, b: JSON) -> Bool { a.text == b.text }

    public var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d):
            if !d.isFinite { out += "null" }
            else if d == d.rounded(), abs(d) < 1e15 { out += String(Int64(d)) + ".0" }
            else { out += "\(d)" }
        case .string(let s): JSON.writeString(s, to: &out)
        case .array(let a):
            out += "["
            for (k, v) in a.enumerated() {
                if k > 0 { out += ", " }
                v.write(to: &out)
            }
            out += "]"
        case .object(let o):
            out += "{"
            for (k, (key, v)) in o.enumerated() {
                if k > 0 { out += ", " }
                JSON.writeString(key, to: &out)
                out += ": "
                v.write(to: &out)
            }
            out += "}"
        }
    }

    static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let h = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - h.count) + h
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        out += "\""
    }
}

extension JSON {
    static func opt(_ v: Int64?) -> JSON { v.map { .int($0) } ?? .null }
    static func opt(_ v: Int?) -> JSON { v.map { .int(Int64($0)) } ?? .null }
    static func opt(_ v: Double?) -> JSON { v.map { .double($0) } ?? .null }
    static func opt(_ v: String?) -> JSON { v.map { .string($0) } ?? .null }
    static func opt(_ v: Rational?) -> JSON { v.map { .string($0.ratioText) } ?? .null }
    static func ints(_ v: [Int]) -> JSON { .array(v.map { .int(Int64($0)) }) }
    static func ints(_ v: [Int64]) -> JSON { .array(v.map { .int($0) }) }
}
