import Foundation
import ReelConfig
import ReelCore

/// `[button]` of reeld.toml, read by ReelConfig's TOML reader: which keys do what, the tally
/// light, the long press and the debounce. Names are kept as written (with their lines) until
/// the device is open: `resolve` checks them against what it offers.
///
/// ```toml
/// [button]
/// hold = "KEY_SPACE"            # a key name as the kernel names it, or an array of them
/// toggle = ["BTN_0"]
/// retake = "KEY_BACKSPACE"
/// stop = "KEY_ESC"
/// long_press_ms = 3000          # a hold key held this long stops (0: never)
/// debounce_ms = 30
/// led = "LED_MISC"              # the input device's LED, or "/sys/class/leds/NAME"
/// ```
public struct ButtonConfig: Sendable, Equatable {
    /// A key name as written, its role and line.
    public struct Binding: Sendable, Equatable {
        public var name: String
        public var role: ButtonRole
        public var line: Int
    }

    /// The tally light: the input device's own LED (`LED_MISC`) or a LED class device.
    public enum Light: Sendable, Equatable {
        case inputLED(name: String, line: Int)
        case ledClass(path: String, line: Int)
    }

    public var path: String
    public var bindings: [Binding] = []
    public var light: Light?
    public var settings = ButtonMachine.Settings()

    public static let table = "button"
    static let longestLongPressMs = 60_000
    static let longestDebounceMs = 1000
    public static let ledClassDirectory = "/sys/class/leds/"
    static let keys = ButtonRole.allCases.map(\.rawValue) + ["long_press_ms", "debounce_ms", "led"]

    /// Reads `[button]` from the file at `path`.
    public init(file path: String) throws(ConfigError) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let why = access(path, F_OK) != 0 ? "no such file" : access(path, R_OK) != 0 ? "permission denied" : "\(error.localizedDescription)"
            throw ConfigError("cannot read config file \(path): \(why) (check the path and its permissions, or pass --config)")
        }
        try self.init(text: String(decoding: data, as: UTF8.self), path: path)
    }

    /// Reads `[button]` from `text` (named `path` in messages). Only the syntax of the rest is
    /// checked: reeld reads it.
    public init(text: String, path: String) throws(ConfigError) {
        self.path = path
        let doc: TOMLDocument
        do { doc = try TOMLDocument(parsing: text) } catch {
            throw ConfigError("\(path):\(error.line): \(error.description) (fix the TOML syntax; see the comments in the installed reeld.toml)",
                              origin: .file(path: path, line: error.line))
        }
        guard doc[Self.table] != nil else {
            throw ConfigError("\(path): no [button] table: reel-button needs one naming at least one key, e.g. '[button]' and 'hold = \"KEY_SPACE\"' at the end of the file (see the installed reeld.toml)")
        }
        guard doc.isOpenTable(Self.table) else {
            let line = doc.line(of: Self.table) ?? 0
            throw ConfigError("\(path):\(line): 'button' must be a [button] table (write '[button]' on a line of its own, its keys below it)",
                              origin: .file(path: path, line: line))
        }
        for e in doc.tableEntries where e.table.first == Self.table {
            let full = (e.table.dropFirst() + e.key).joined(separator: ".")
            try apply(full, e.value, line: e.line)
        }
        if bindings.isEmpty {
            let line = doc.line(of: Self.table) ?? 0
            throw ConfigError("\(path):\(line): [button] names no key (add e.g. 'hold = \"KEY_SPACE\"': a key of hold, toggle, retake or stop)",
                              origin: .file(path: path, line: line))
        }
    }

    private func fail(_ line: Int, _ key: String, _ what: String) -> ConfigError {
        ConfigError("\(path):\(line): [button] \(key): \(what)", origin: .file(path: path, line: line))
    }

    private mutating func apply(_ key: String, _ value: TOMLDocument.Value, line: Int) throws(ConfigError) {
        if let role = ButtonRole(rawValue: key) {
            let names: [String]
            if let s = value.string {
                names = [s]
            } else if let items = value.array, items.allSatisfy({ $0.string != nil }) {
                names = items.compactMap(\.string)
            } else {
                throw fail(line, key, "expected a key name such as \"KEY_SPACE\" or an array of them, found \(value.type)")
            }
            for name in names {
                if let other = bindings.first(where: { $0.name == name }) {
                    throw fail(line, key, "\(name) is already the \(other.role.rawValue) key (line \(other.line)); a key has one role")
                }
                bindings.append(Binding(name: name, role: role, line: line))
            }
            return
        }
        switch key {
        case "long_press_ms":
            settings.longPressNs = Nanos(try milliseconds(key, value, line: line, max: Self.longestLongPressMs)) * 1_000_000
        case "debounce_ms":
            settings.debounceNs = Nanos(try milliseconds(key, value, line: line, max: Self.longestDebounceMs)) * 1_000_000
        case "led":
            guard let s = value.string else {
                throw fail(line, key, "expected a string: an LED of the input device such as \"LED_MISC\", or \"\(Self.ledClassDirectory)NAME\"; found \(value.type)")
            }
            if s.isEmpty {
                light = nil
            } else if s.hasPrefix("/") {
                guard s.hasPrefix(Self.ledClassDirectory), s.count > Self.ledClassDirectory.count else {
                    throw fail(line, key, "'\(s)' is not a LED class device (write \"\(Self.ledClassDirectory)NAME\", or an LED of the input device such as \"LED_MISC\")")
                }
                light = .ledClass(path: s, line: line)
            } else {
                light = .inputLED(name: s, line: line)
            }
        default:
            throw fail(line, key, "unknown key (the keys of [button] are \(Self.keys.joined(separator: ", ")))")
        }
    }

    private func milliseconds(_ key: String, _ value: TOMLDocument.Value, line: Int, max: Int) throws(ConfigError) -> Int {
        guard let ms = value.int else { throw fail(line, key, "expected an integer number of milliseconds (no quotes), found \(value.type)") }
        guard (0...max).contains(ms) else { throw fail(line, key, "\(ms) is out of range 0 to \(max) (milliseconds)") }
        return ms
    }

    /// A key, resolved: its event code and role.
    public struct Key: Sendable, Equatable {
        public var name: String
        public var code: Int
        public var role: ButtonRole
    }

    /// Checks every key name against the device: `code` gives the kernel's code for a name (nil
    /// for a name the kernel does not have), `offers` whether the device has that code; `device`
    /// names it and `offered` lists its names, both for the error.
    public func resolve(device: String, code: (String) -> Int?, offers: (Int) -> Bool,
                        offered: () -> [String]) throws(ConfigError) -> [Key] {
        var keys: [Key] = []
        for b in bindings {
            let c = code(b.name)
            guard let c, offers(c) else {
                let what = c == nil ? "no key is named '\(b.name)'" : "\(device) has no key \(b.name)"
                let names = offered()
                let list = names.isEmpty ? "it offers no keys" : "it offers \(names.joined(separator: ", "))"
                throw fail(b.line, b.role.rawValue, "\(what); \(list) (name one of those, as the kernel names it)")
            }
            keys.append(Key(name: b.name, code: c, role: b.role))
        }
        return keys
    }

    /// Checks the names against the kernel's alone, while `device` is absent (it lists its own when present).
    public func checkNames(keyCode: (String) -> Int?, ledCode: (String) -> Int?, device: String) throws(ConfigError) {
        for b in bindings where keyCode(b.name) == nil {
            throw fail(b.line, b.role.rawValue, "no key is named '\(b.name)' (name it as the kernel does, e.g. KEY_SPACE or BTN_0; \(device) is not present to list its own)")
        }
        if case let .inputLED(name, line) = light, ledCode(name) == nil {
            throw fail(line, "led", "no LED is named '\(name)' (name it as the kernel does, e.g. LED_MISC, or a LED class device \"\(Self.ledClassDirectory)NAME\")")
        }
    }

    /// Checks the input device's LED named `name` (written on `line`) as `resolve` does keys.
    public func resolveLED(_ name: String, line: Int, device: String, code: (String) -> Int?, offers: (Int) -> Bool,
                           offered: () -> [String]) throws(ConfigError) -> Int {
        let c = code(name)
        guard let c, offers(c) else {
            let what = c == nil ? "no LED is named '\(name)'" : "\(device) has no LED \(name)"
            let names = offered()
            let list = names.isEmpty ? "it has no LEDs (use a LED class device, \"\(Self.ledClassDirectory)NAME\", or leave led out)" : "it offers \(names.joined(separator: ", ")) (name one of those, or a LED class device \"\(Self.ledClassDirectory)NAME\")"
            throw fail(line, "led", "\(what); \(list)")
        }
        return c
    }
}
