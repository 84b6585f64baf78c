import ReelCore

/// The table `reelctl controls` prints, laid out like `v4l2-ctl -L`: one line per control
/// (name, id, type, range, default, value, flags), menu entries under their control.
public enum ControlsText {
    /// `{"controls":[...]}`, each control's keys in the documented order (for `--json`).
    public static func json(_ controls: [CameraControlInfo]) -> String {
        var w = JSONWriter()
        w.object { o in
            o.key("controls")
            o.array(controls) { a, c in c.write(to: &a) }
        }
        return String(decoding: w.bytes, as: UTF8.self)
    }

    public static func render(_ controls: [CameraControlInfo]) -> String {
        if controls.isEmpty { return "the camera has no controls\n" }
        let width = max(31, controls.map(\.name.count).max() ?? 0)
        var out = ""
        for c in controls {
            let name = String(repeating: " ", count: width - c.name.count) + c.name
            let hex = String(c.id, radix: 16)
            let id = "0x" + String(repeating: "0", count: max(0, 8 - hex.count)) + hex
            let type = ("(" + c.type.rawValue + ")").padding(9)
            var fields: [String] = []
            switch c.type {
            case .int, .int64: fields = ["min=\(c.min)", "max=\(c.max)", "step=\(c.step)", "default=\(c.defaultValue)"]
            case .bool: fields = ["default=\(c.defaultValue)"]
            case .menu, .intmenu: fields = ["min=\(c.min)", "max=\(c.max)", "default=\(c.defaultValue)"]
            case .bitmask: fields = ["max=\(c.show(c.max))", "default=\(c.show(c.defaultValue))"]
            case .string: fields = ["min=\(c.min)", "max=\(c.max)", "step=\(c.step)"]
            case .button: break
            }
            if let v = c.value {
                switch c.type {
                case .menu, .intmenu: fields.append("value=\(v) (\(c.show(v)))")
                case .bitmask: fields.append("value=\(c.show(v))")
                default: fields.append("value=\(v)")
                }
            } else if let t = c.text {
                fields.append("value='\(t)'")
            }
            if !c.flags.isEmpty { fields.append("flags=" + c.flags.joined(separator: ",")) }
            out += "\(name) \(id) \(type): \(fields.joined(separator: " "))".trimmedRight + "\n"
            for m in c.menu {
                out += String(repeating: " ", count: width + 1) + "\(m.index): \(m.name)\n"
            }
        }
        return out
    }
}

private extension String {
    func padding(_ n: Int) -> String { count >= n ? self : self + String(repeating: " ", count: n - count) }
    var trimmedRight: String {
        var s = Substring(self)
        while s.last == " " { s.removeLast() }
        return String(s)
    }
}
