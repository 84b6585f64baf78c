/// Camera controls (V4L2 controls: brightness, exposure, white balance, ...) as Reel names,
/// lists, parses and checks them. Pure: the ioctls are in ReelCapture (V4L2Controls.swift);
/// everything a user types is judged here against a control's description, before any ioctl.

/// What a control holds, named as `v4l2-ctl -l` names it.
public enum CameraControlType: String, Codable, Sendable, CaseIterable {
    case int, int64, bool, menu, intmenu, button, bitmask, string
}

/// One menu entry: its index (what the driver stores) and its name, or for an integer menu
/// its integer value.
public struct CameraControlMenuEntry: Codable, Sendable, Equatable {
    public var index: Int64
    public var name: String
    public init(index: Int64, name: String) { self.index = index; self.name = name }
}

/// One control of a camera as `controls` lists it (docs/PROTOCOL.md).
public struct CameraControlInfo: Codable, Sendable, Equatable {
    /// The name as v4l2-ctl spells it (`white_balance_automatic`): what `set` and the config take.
    public var name: String
    /// The driver's own name (`White Balance, Automatic`).
    public var label: String
    /// The V4L2 control id (V4L2_CID_*).
    public var id: UInt32
    public var type: CameraControlType
    public var min: Int64
    public var max: Int64
    public var step: Int64
    public var defaultValue: Int64
    /// The current value (a menu's index); nil for a button, a write-only control or a string.
    public var value: Int64?
    /// The current text of a string control.
    public var text: String?
    /// Menu and integer-menu entries (only the indexes the driver accepts).
    public var menu: [CameraControlMenuEntry]
    /// V4L2 flags worth knowing: `read-only`, `write-only`, `inactive` (another control, e.g.
    /// an automatic mode, decides it now), `grabbed` (locked while streaming), `volatile`, `slider`.
    public var flags: [String]

    public init(name: String, label: String, id: UInt32, type: CameraControlType, min: Int64, max: Int64, step: Int64,
                defaultValue: Int64, value: Int64?, text: String? = nil, menu: [CameraControlMenuEntry] = [], flags: [String] = []) {
        self.name = name; self.label = label; self.id = id; self.type = type; self.min = min; self.max = max; self.step = step
        self.defaultValue = defaultValue; self.value = value; self.text = text; self.menu = menu; self.flags = flags
    }

    enum CodingKeys: String, CodingKey {
        case name, label, id, type, min, max, step, defaultValue = "default", value, text, menu, flags
    }

    public var isReadOnly: Bool { flags.contains("read-only") }
    /// Locked by the driver while the camera streams (a set is refused with EBUSY).
    public var isGrabbed: Bool { flags.contains("grabbed") }
    /// An automatic mode decides it now.
    public var isInactive: Bool { flags.contains("inactive") }

    /// What values the control takes, for messages and `reelctl controls`:
    /// `0...255 (step 1)`, `true or false`, `one of: 0 "Disabled", 1 "50 Hz"`.
    public var rangeText: String {
        switch type {
        case .int, .int64: return "\(min)...\(max) (step \(step))"
        case .bool: return "true or false (or 1 or 0)"
        case .menu, .intmenu:
            return "one of " + menu.map { "\($0.index) \"\($0.name)\"" }.joined(separator: ", ") + " (a name or its index)"
        case .button: return "any value (it is a button: setting it presses it)"
        case .bitmask: return "a bit mask within 0x\(String(UInt32(truncatingIfNeeded: max), radix: 16))"
        case .string: return "a string of \(min)...\(max) characters"
        }
    }

    /// `value` as people read it: a menu's entry name, true/false, the integer.
    public func show(_ v: Int64) -> String {
        switch type {
        case .bool: return v != 0 ? "true" : "false"
        case .menu, .intmenu: return menu.first { $0.index == v }.map { "\($0.name)" } ?? "\(v)"
        case .bitmask: return "0x" + String(UInt32(truncatingIfNeeded: v), radix: 16)
        default: return "\(v)"
        }
    }
}

/// A value as written by a user: a TOML or JSON integer, boolean or string, or the text after
/// `NAME=` on reelctl's command line. Encoded as the bare JSON scalar.
public enum CameraControlInput: Sendable, Equatable, Codable, CustomStringConvertible {
    case int(Int64)
    case bool(Bool)
    case text(String)

    public var description: String {
        switch self {
        case let .int(i): return "\(i)"
        case let .bool(b): return b ? "true" : "false"
        case let .text(t): return t
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        // JSONDecoder reads neither `1` as a Bool nor `true` as an integer (ControlValueTests checks).
        if let s = try? c.decode(String.self) { self = .text(s); return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let i = try? c.decode(Int64.self) { self = .int(i); return }
        throw DecodingError.typeMismatch(CameraControlInput.self, .init(codingPath: c.codingPath,
            debugDescription: "a control value must be an integer, true/false or a string"))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case let .int(i): try c.encode(i)
        case let .bool(b): try c.encode(b)
        case let .text(t): try c.encode(t)
        }
    }
}

/// One control to set: its name, the value as written, and where it was written (for
/// messages: `/etc/reel/reeld.toml:42`, `reelctl set`).
public struct CameraControlAssignment: Sendable, Equatable {
    public var name: String
    public var input: CameraControlInput
    public var origin: String
    public init(name: String, input: CameraControlInput, origin: String) { self.name = name; self.input = input; self.origin = origin }
}

public enum CameraControls {
    /// A driver's control name as v4l2-ctl spells it (v4l-utils' `name2var`): ASCII letters
    /// and digits lowercased, every run of other bytes between two of them one `_`, none at
    /// either end. "White Balance, Automatic" -> "white_balance_automatic".
    public static func name(_ driverName: String) -> String {
        var out = ""
        var pendingUnderscore = false
        for u in driverName.utf8 {
            let alnum = (u >= 0x30 && u <= 0x39) || (u >= 0x41 && u <= 0x5A) || (u >= 0x61 && u <= 0x7A)
            if alnum {
                if pendingUnderscore { out.append("_") }
                pendingUnderscore = false
                out.unicodeScalars.append(Unicode.Scalar(u >= 0x41 && u <= 0x5A ? u + 0x20 : u))
            } else if !out.isEmpty {
                pendingUnderscore = true
            }
        }
        return out
    }

    /// Whether `s` could be a control name at all (what `name` produces): for checking a config
    /// file's keys before any camera is open.
    public static func isWellFormedName(_ s: String) -> Bool {
        !s.isEmpty && s == name(s)
    }

    /// The value to hand the driver for `input`, checked against `control`; or the error:
    /// `cannot set NAME=VALUE: WHY (see 'reelctl controls')`.
    /// `camera` (`/dev/video0 (vivid)`), when given, is named after the value.
    public static func resolve(_ input: CameraControlInput, for control: CameraControlInfo, camera: String? = nil) -> Result<Int64, ControlValueError> {
        func fail(_ why: String) -> Result<Int64, ControlValueError> {
            let on = camera.map { " on camera \($0)" } ?? ""
            return .failure(ControlValueError(message: "cannot set \(control.name)=\(input)\(on): \(why) (see 'reelctl controls')"))
        }
        if control.isReadOnly { return fail("the control is read-only") }
        switch control.type {
        case .string:
            return fail("\(control.name) is a string control, which Reel does not set (use v4l2-ctl --set-ctrl)")
        case .button:
            switch input {
            case .bool(false), .int(0): return fail("\(control.name) is a button: set it to true (or 1) to press it")
            default: return .success(1)
            }
        case .bool:
            switch input {
            case let .bool(b): return .success(b ? 1 : 0)
            case let .int(i) where i == 0 || i == 1: return .success(i)
            case let .text(t):
                switch t.lowercased() {
                case "true", "1": return .success(1)
                case "false", "0": return .success(0)
                default: return fail("expected \(control.rangeText)")
                }
            default: return fail("expected \(control.rangeText)")
            }
        case .menu, .intmenu:
            let index: Int64?
            switch input {
            case let .int(i): index = i
            case .bool: return fail("expected \(control.rangeText)")
            case let .text(t):
                let trimmed = t.trimmingCharacters(in: " ")
                if let byName = control.menu.first(where: { $0.name.lowercased() == trimmed.lowercased() }) {
                    index = byName.index
                } else {
                    index = Int64(trimmed)
                }
            }
            guard let index, control.menu.contains(where: { $0.index == index }) else {
                return fail("not an entry of the menu: expected \(control.rangeText)")
            }
            return .success(index)
        case .int, .int64, .bitmask:
            let v: Int64
            switch input {
            case let .int(i): v = i
            case .bool: return fail("expected an integer, \(control.rangeText)")
            case let .text(t):
                let s = t.trimmingCharacters(in: " ")
                if control.type == .bitmask, s.lowercased().hasPrefix("0x"), let h = Int64(s.dropFirst(2), radix: 16) { v = h }
                else if let i = Int64(s) { v = i }
                else { return fail("not an integer: expected \(control.rangeText)") }
            }
            if control.type == .bitmask {
                guard v >= 0, v & ~control.max == 0 else { return fail("bits outside the mask: expected \(control.rangeText)") }
                return .success(v)
            }
            guard v >= control.min, v <= control.max else { return fail("out of range \(control.rangeText)") }
            if control.step > 1, (v - control.min) % control.step != 0 {
                let below = v - (v - control.min) % control.step
                let near = [below, below + control.step].filter { $0 >= control.min && $0 <= control.max }.map(String.init)
                return fail("not on the step: \(control.rangeText) takes \(control.min) plus a multiple of \(control.step) (e.g. \(near.joined(separator: " or ")))")
            }
            return .success(v)
        }
    }

    /// The control named `name` in `controls`, or the error naming the camera and the closest
    /// names: `camera /dev/video0 (vivid) has no control 'brightnes' (did you mean brightness?)`.
    public static func find(_ name: String, in controls: [CameraControlInfo], camera: String) -> Result<CameraControlInfo, ControlValueError> {
        if let c = controls.first(where: { $0.name == name }) { return .success(c) }
        let near = closeNames(to: name, in: controls.map(\.name))
        let hint = near.isEmpty ? "" : " (did you mean \(near.joined(separator: ", "))?)"
        return .failure(ControlValueError(message: "camera \(camera) has no control '\(name)'\(hint); 'reelctl controls' lists its \(controls.count) controls"))
    }

    /// Up to three names close to `name`: the same after normalising (`Brightness`,
    /// `white-balance-automatic`), one containing it or contained in it, or a small edit distance.
    public static func closeNames(to name: String, in names: [String]) -> [String] {
        let n = Self.name(name)
        if names.contains(n) { return [n] }
        let scored = names.map { candidate -> (String, Int) in
            let d = editDistance(n, candidate)
            let contains = !n.isEmpty && (candidate.contains(n) || n.contains(candidate))
            return (candidate, contains ? min(d, 1) : d)
        }
        let limit = max(2, n.count / 3)
        return scored.filter { $0.1 <= limit }.sorted { ($0.1, $0.0) < ($1.1, $1.0) }.prefix(3).map(\.0)
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var row = Array(0...b.count)
        for i in 1...a.count {
            var prev = row[0]
            row[0] = i
            for j in 1...b.count {
                let cur = row[j]
                row[j] = Swift.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1))
                prev = cur
            }
        }
        return row[b.count]
    }
}

/// A control value that cannot be set, as people read it (names the control, its range or
/// menu, and the fix).
public struct ControlValueError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

private extension String {
    func trimmingCharacters(in c: Character) -> Substring {
        var s = Substring(self)
        while s.first == c { s.removeFirst() }
        while s.last == c { s.removeLast() }
        return s
    }
}
