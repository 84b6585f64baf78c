import Foundation
import ReelCore

/// Encoding and parsing of protocol lines, shared by server, client and tests.
public enum Wire {
    /// Longest accepted request line in bytes, not counting its `\n`.
    public static let maxLineBytes = 64 * 1024

    /// `value` as one line of compact JSON terminated by `\n`. The protocol's own types are
    /// written with their keys in the documented order; anything else with sorted keys.
    public static func line(_ value: some Encodable) throws -> [UInt8] {
        var bytes: [UInt8]
        if let ordered = value as? any OrderedJSON {
            var writer = JSONWriter()
            try ordered.write(to: &writer)
            bytes = writer.bytes
        } else {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
            bytes = [UInt8](try encoder.encode(value))
        }
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// `value` as compact JSON text without a newline (for printing).
    public static func text(_ value: some Encodable) throws -> String {
        var bytes = try line(value)
        bytes.removeLast()
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Parses one request line (without its `\n`). On failure gives the `bad_request` error and
    /// whatever `id` could be read from the line, so the error reply can still echo it.
    public static func parseRequest(_ line: some Collection<UInt8>) -> Result<Request, RequestParseError> {
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: Data(line))
        } catch {
            return .failure(.init(id: nil, error: .badRequest(
                "malformed request: not a JSON object on one line (send e.g. {\"v\":1,\"cmd\":\"status\"})")))
        }
        let id = envelope.id
        func bad(_ message: String) -> Result<Request, RequestParseError> {
            .failure(.init(id: id, error: .badRequest(message)))
        }
        guard envelope.idValid else {
            return bad("bad \"id\": must be an integer (or left out)")
        }
        guard let v = envelope.v else {
            return bad("missing \"v\": add \"v\":\(protocolVersion) to the request")
        }
        guard v == protocolVersion else {
            return bad("unsupported protocol version \(v): this reeld speaks \"v\":\(protocolVersion)")
        }
        let known = Command.allCases.map(\.rawValue).joined(separator: ", ")
        guard let cmdText = envelope.cmd else {
            return bad("missing \"cmd\": must be one of \(known)")
        }
        guard let cmd = Command(rawValue: cmdText) else {
            return bad("unknown command \"\(cmdText)\": must be one of \(known)")
        }
        if !envelope.nameValid {
            return bad("bad \"name\": must be a string (or left out)")
        }
        if let name = envelope.name, cmd == .start, let problem = nameProblem(name) {
            return bad(problem)
        }
        if !envelope.argsValid {
            return bad("bad \"args\": must be an object of control names and values, each an integer, true/false or a string (e.g. {\"brightness\":200})")
        }
        if !envelope.labelValid {
            return bad("bad \"label\": must be a string (or left out)")
        }
        if let label = envelope.label, cmd == .start || cmd == .resume, let problem = labelProblem(label) {
            return bad(problem)
        }
        if cmd == .start, let problem = envelope.maxDurationProblem {
            return bad(problem)
        }
        if cmd == .start, !envelope.atValid {
            return bad("bad \"atNs\": must be an integer number of nanoseconds on reeld's CLOCK_MONOTONIC (or left out)")
        }
        if cmd == .start, let problem = envelope.preRollProblem {
            return bad(problem)
        }
        if !envelope.widthValid || ((cmd == .snapshot || cmd == .preview) && (envelope.width ?? 16) < 16) {
            return bad("bad \"width\": must be an integer of at least 16 (pixels; or left out for \(cmd == .preview ? "640" : "the captured size"))")
        }
        if !envelope.fpsValid || (cmd == .preview && (envelope.fps ?? 1) < 1) {
            return bad("bad \"fps\": must be an integer of at least 1 (frames a second; or left out for 10)")
        }
        if !envelope.takeValid { return bad("bad \"take\": must be an integer (or left out)") }
        if !envelope.timeoutValid || !(1...Self.maxTimeoutMs).contains(envelope.timeoutMs ?? 1) {
            return bad("bad \"timeoutMs\": must be an integer from 1 to \(Self.maxTimeoutMs) (ms the client waits for the reply; or left out)")
        }
        if cmd == .undo, let take = envelope.take, let problem = takeProblem(take) { return bad(problem) }
        if !envelope.resetValid {
            return bad("bad \"reset\": must be true (every control 'set' changed) or a non-empty list of control names, e.g. [\"brightness\"]")
        }
        if cmd == .set, envelope.reset != nil, !(envelope.args?.isEmpty ?? true) {
            return bad("'set' takes \"args\" or \"reset\", not both (reset first, then set)")
        }
        if cmd == .set, envelope.reset == nil, envelope.args?.isEmpty ?? true {
            return bad("'set' needs \"args\": the controls to set, e.g. {\"brightness\":200} (see 'reelctl controls'), or \"reset\": true to clear earlier sets")
        }
        return .success(Request(v: v, id: id, cmd: cmd, name: cmd == .start ? envelope.name : nil, args: cmd == .set ? envelope.args : nil,
                                label: cmd == .start || cmd == .resume ? envelope.label : nil,
                                maxDurationNs: cmd == .start ? envelope.maxDurationNs : nil,
                                width: cmd == .snapshot || cmd == .preview ? envelope.width : nil, take: cmd == .undo ? envelope.take : nil,
                                reset: cmd == .set ? envelope.reset : nil, timeoutMs: envelope.timeoutMs,
                                fps: cmd == .preview ? envelope.fps : nil, preRollNs: cmd == .start ? envelope.preRollNs : nil,
                                atNs: cmd == .start ? envelope.atNs : nil))
    }

    /// The longest label, in UTF-8 bytes.
    public static let maxLabelBytes = 255
    /// The longest length cap, ns (a week; also `max_duration`'s range).
    public static let maxDurationLimitNs: Nanos = Int64(LengthCap.maxSeconds) * nanosPerSecond

    /// Why `label` cannot name a take, or nil if it can.
    public static func labelProblem(_ label: String) -> String? {
        let hint = "use a short title such as 'intro'"
        if label.isEmpty { return "bad \"label\": empty (\(hint), or leave it out: the take is then called 'Take N')" }
        if label.utf8.count > maxLabelBytes { return "bad \"label\": \(label.utf8.count) bytes, longer than \(maxLabelBytes) (\(hint))" }
        if label.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) }) {
            return "bad \"label\": contains control characters (\(hint), on one line)"
        }
        for (i, u) in label.unicodeScalars.enumerated() where isInvisibleFormat(u) {
            let hex = String(u.value, radix: 16, uppercase: true)
            let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            let name = u.properties.name.map { " " + $0 } ?? ""
            return "bad \"label\": \(code)\(name) at character \(i + 1) is an invisible or direction-changing character: a chapter title could pretend to be another with it (\(hint), in plain text)"
        }
        return nil
    }

    /// Bidirectional embeddings, overrides, isolates and marks, zero-width and other invisible
    /// format characters: what makes a title display as something other than what it holds.
    static func isInvisibleFormat(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0x00AD, 0x034F, 0x061C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B...0x180F, 0x200B...0x200F, 0x202A...0x202E,
             0x2060...0x206F, 0x3164, 0xFEFF, 0xFFA0, 0xFFF9...0xFFFB:
            return true
        default: return false
        }
    }

    /// The longest `timeoutMs` (an hour).
    public static let maxTimeoutMs = 3_600_000

    /// Why `take` cannot name the take an `undo` expects to remove, or nil if it can.
    public static func takeProblem(_ take: Int) -> String? {
        take >= 1 ? nil : "bad \"take\": \(take) is not a take number (takes are numbered from 1; see 'reelctl takes')"
    }

    /// Why `ns` cannot be a length cap, or nil if it can (0: none).
    public static func maxDurationProblem(_ ns: Nanos) -> String? {
        if ns < 0 || ns > maxDurationLimitNs {
            return "bad \"maxDurationNs\": \(ns) is out of range 0 to \(maxDurationLimitNs) (ns; 0 means no cap)"
        }
        return nil
    }

    /// Why `name` cannot be a recording's base name, or nil if it can. The daemon may apply
    /// stricter rules of its own.
    public static func nameProblem(_ name: String) -> String? {
        let hint = "use a plain file name such as 'clip-1'"
        if name.isEmpty { return "bad \"name\": empty (\(hint), or leave it out)" }
        if name.utf8.count > 200 { return "bad \"name\": longer than 200 bytes (\(hint))" }
        if name.hasPrefix(".") { return "bad \"name\" \"\(name)\": must not start with '.' (\(hint))" }
        if name.contains("/") { return "bad \"name\" \"\(name)\": must not contain '/' (\(hint))" }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            return "bad \"name\": contains control characters (\(hint))"
        }
        return nil
    }

    /// A lenient view of a request, so that type errors in one field give a precise message.
    private struct Envelope: Decodable {
        var v: Int?
        var id: Int?
        var idValid = true
        var cmd: String?
        var name: String?
        var nameValid = true
        var args: [String: CameraControlInput]?
        var argsValid = true
        var label: String?
        var labelValid = true
        var maxDurationNs: Nanos?
        var maxDurationValid = true
        var preRollNs: Nanos?
        var preRollValid = true
        var atNs: Nanos?
        var atValid = true
        var width: Int?
        var widthValid = true
        var fps: Int?
        var fpsValid = true
        var take: Int?
        var takeValid = true
        var reset: ControlReset?
        var resetValid = true
        var timeoutMs: Int?
        var timeoutValid = true

        var maxDurationProblem: String? {
            guard maxDurationValid else { return "bad \"maxDurationNs\": must be an integer number of nanoseconds (or left out)" }
            return maxDurationNs.flatMap(Wire.maxDurationProblem)
        }

        /// The bounds only; whether the configured pre-roll holds that much is reeld's to say.
        var preRollProblem: String? {
            guard preRollValid, let ns = preRollNs else {
                return preRollValid ? nil : "bad \"preRollNs\": must be an integer number of nanoseconds (or left out)"
            }
            let max = Int64(PreRoll.maxSeconds) * nanosPerSecond
            return (0...max).contains(ns) ? nil : "bad \"preRollNs\": \(ns) is out of range 0 to \(max) (ns; 0 for none)"
        }

        enum CodingKeys: String, CodingKey { case v, id, cmd, name, args, label, maxDurationNs, preRollNs, atNs, width, fps, take, reset, timeoutMs }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            v = try? c.decodeIfPresent(Int.self, forKey: .v)
            if c.contains(.v), v == nil { v = -1 }  // present but not an integer: a wrong version
            if c.contains(.id), (try? c.decodeNil(forKey: .id)) != true {
                id = try? c.decode(Int.self, forKey: .id)
                idValid = id != nil
            }
            cmd = try? c.decodeIfPresent(String.self, forKey: .cmd)
            if c.contains(.cmd), cmd == nil, (try? c.decodeNil(forKey: .cmd)) != true { cmd = "(not a string)" }
            if c.contains(.name), (try? c.decodeNil(forKey: .name)) != true {
                name = try? c.decode(String.self, forKey: .name)
                nameValid = name != nil
            }
            if c.contains(.args), (try? c.decodeNil(forKey: .args)) != true {
                args = try? c.decode([String: CameraControlInput].self, forKey: .args)
                argsValid = args != nil
            }
            if c.contains(.label), (try? c.decodeNil(forKey: .label)) != true {
                label = try? c.decode(String.self, forKey: .label)
                labelValid = label != nil
            }
            if c.contains(.maxDurationNs), (try? c.decodeNil(forKey: .maxDurationNs)) != true {
                maxDurationNs = try? c.decode(Nanos.self, forKey: .maxDurationNs)
                maxDurationValid = maxDurationNs != nil
            }
            if c.contains(.preRollNs), (try? c.decodeNil(forKey: .preRollNs)) != true {
                preRollNs = try? c.decode(Nanos.self, forKey: .preRollNs)
                preRollValid = preRollNs != nil
            }
            if c.contains(.atNs), (try? c.decodeNil(forKey: .atNs)) != true {
                atNs = try? c.decode(Nanos.self, forKey: .atNs)
                atValid = atNs != nil
            }
            if c.contains(.width), (try? c.decodeNil(forKey: .width)) != true {
                width = try? c.decode(Int.self, forKey: .width)
                widthValid = width != nil
            }
            if c.contains(.fps), (try? c.decodeNil(forKey: .fps)) != true {
                fps = try? c.decode(Int.self, forKey: .fps)
                fpsValid = fps != nil
            }
            if c.contains(.take), (try? c.decodeNil(forKey: .take)) != true {
                take = try? c.decode(Int.self, forKey: .take)
                takeValid = take != nil
            }
            if c.contains(.timeoutMs), (try? c.decodeNil(forKey: .timeoutMs)) != true {
                timeoutMs = try? c.decode(Int.self, forKey: .timeoutMs)
                timeoutValid = timeoutMs != nil
            }
            if c.contains(.reset), (try? c.decodeNil(forKey: .reset)) != true {
                if let all = try? c.decode(Bool.self, forKey: .reset) {
                    reset = all ? .all : nil
                } else if let names = try? c.decode([String].self, forKey: .reset), !names.isEmpty,
                          names.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 64 }), names.count <= 256 {
                    reset = .only(names)
                } else { resetValid = false }
            }
        }
    }
}

/// A request line that could not be parsed: the `bad_request` error and the id, if readable.
public struct RequestParseError: Error, Sendable, Equatable {
    public var id: Int?
    public var error: ControlError
}
