import Foundation

/// One setting's value as written: as TOML types it in the file (a flag or a variable gives a
/// string, typed by `DaemonSettings.parse`). Its check reads it into the setting's typed field.
public enum SettingValue: Sendable, Equatable, CustomStringConvertible {
    case string(String)
    case int(Int)
    case strings([String])
    case bool(Bool)

    public var description: String {
        switch self {
        case let .string(s): return "\"\(s)\""
        case let .int(i): return String(i)
        case let .strings(a): return "[" + a.map { "\"\($0)\"" }.joined(separator: ", ") + "]"
        case let .bool(b): return String(b)
        }
    }
}

/// One setting's declaration (see `SettingKey.spec`).
public struct SettingSpec: Sendable {
    /// How the value is typed in the file (flags and the environment give strings).
    public enum Kind: Sendable { case string, int, stringOrInt, strings, bool }
    /// The parts of reeld.toml, in order.
    public enum Section: String, CaseIterable, Sendable {
        case control = "Control", storage = "Storage", sources = "Sources", encoding = "Encoding", monitoring = "Monitoring"
    }
    /// What values are allowed, as the docs and messages say it (the check itself is `SettingCheck`).
    public enum Rule: Sendable, Equatable {
        /// An integer in range; `unit` follows the range in messages (" Hz", "; 0 means ...").
        case range(ClosedRange<Int>, unit: String)
        case oneOf([String])
        /// A program and its arguments (`on_finish`).
        case program
        /// true or false.
        case boolean
        /// Any other string: a path, a source, a size, ... (its parser says what is wrong and the fix).
        case text
    }

    public let section: Section
    public let defaultValue: SettingValue
    public let rule: Rule
    public let kind: Kind
    /// For `--help` and reeld.toml: {range} and {values} expanded, nothing else to keep in step.
    public let help: String
    public let doc: String
    /// Read once at start-up: a SIGHUP reload does not change it (reeld warns).
    public let restartToApply: Bool
    /// A setting of the daemon (`reeld serve`: its socket, output directory, hooks, standby,
    /// metrics) that a one-shot `reeld record` has no use for: given to it as a flag it is an
    /// error, in the environment a warning, in the shared config file nothing.
    public let serveOnly: Bool
    /// The check as it reads a value into the setting's field of `Settings`.
    let field: Field

    /// `field`: where the checked value is kept; its type is the type `check` reads the value into.
    init<Value>(_ section: Section, _ field: WritableKeyPath<Settings, Value> & Sendable, _ defaultValue: SettingValue,
                _ check: SettingCheck<Value>, restartToApply: Bool = false, serveOnly: Bool = false,
                help: String, doc: String, values: [String]? = nil) {
        self.section = section
        self.restartToApply = restartToApply
        self.serveOnly = serveOnly
        self.defaultValue = defaultValue
        self.rule = check.rule
        self.kind = check.kind
        self.field = Field(check, field)
        var expand: [(String, String)] = []
        if case let .range(r, _) = rule { expand.append(("{range}", "\(r.lowerBound) to \(r.upperBound)")) }
        if case let .oneOf(v) = rule { expand.append(("{values}", v.joined(separator: ", "))) }
        if let values { expand.append(("{values}", values.joined(separator: ", "))) }
        self.help = expand.reduce(help) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
        self.doc = expand.reduce(doc) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
    }

    /// What is wrong with `value` as this setting's, and the fix; nil if it passes.
    public func check(_ value: SettingValue) -> String? { field.problem(value) }

    /// A setting's check with its field, the value's type erased (the table holds every type).
    struct Field: Sendable {
        /// The field, for SettingTableTests (each field of `Settings` is one key's).
        let keyPath: AnyKeyPath & Sendable
        /// Checks `value`; if it is fine, writes what it reads into the field of `settings` and
        /// returns nil, else returns what is wrong and the fix (and writes nothing).
        let write: @Sendable (_ value: SettingValue, _ settings: inout Settings) -> String?
        /// Whether two `Settings` hold the same value in this field.
        let same: @Sendable (Settings, Settings) -> Bool

        init<Value>(_ check: SettingCheck<Value>, _ field: WritableKeyPath<Settings, Value> & Sendable) {
            keyPath = field
            write = { value, settings in
                switch check.read(value) {
                case let .success(v): settings[keyPath: field] = v; return nil
                case let .failure(problem): return problem.text
                }
            }
            same = { $0[keyPath: field] == $1[keyPath: field] }
        }

        /// What is wrong with `value`, nil if it passes.
        func problem(_ value: SettingValue) -> String? {
            var scratch = Settings.defaults
            return write(value, &scratch)
        }
    }
}

/// What is wrong with a setting's value, and the fix.
public struct SettingProblem: Error, Sendable, ExpressibleByStringInterpolation {
    public let text: String
    public init(stringLiteral text: String) { self.text = text }
    public init(stringInterpolation: DefaultStringInterpolation) { text = String(stringInterpolation: stringInterpolation) }
}

/// A setting's one check, which is also its parser: a value as written becomes the typed value
/// its field in `Settings` holds, or a problem naming what is wrong and the fix. Nothing reads the
/// value again after it, so no later step can find it of the wrong kind.
public struct SettingCheck<Value: Sendable & Equatable>: Sendable {
    let rule: SettingSpec.Rule
    let kind: SettingSpec.Kind
    let read: @Sendable (SettingValue) -> Result<Value, SettingProblem>
}

extension SettingCheck where Value == Int {
    /// An integer in `range`; `unit` follows it in messages.
    static func range(_ range: ClosedRange<Int>, unit: String) -> Self {
        Self(rule: .range(range, unit: unit), kind: .int) {
            guard case let .int(i) = $0 else { return .failure("expected an integer") }
            return range.contains(i) ? .success(i) : .failure("\(i) is out of range (use \(range.lowerBound) to \(range.upperBound)\(unit))")
        }
    }
}

extension SettingCheck where Value == Bool {
    static var boolean: Self {
        Self(rule: .boolean, kind: .bool) {
            guard case let .bool(b) = $0 else { return .failure("expected true or false") }
            return .success(b)
        }
    }
}

extension SettingCheck where Value == [String] {
    /// A program and its arguments, run without a shell: its path must be absolute.
    static var program: Self {
        Self(rule: .program, kind: .strings) {
            guard case let .strings(a) = $0 else { return .failure("expected an array of strings") }
            if let first = a.first, !first.hasPrefix("/") {
                return .failure("the program \(DaemonSettings.show(first)) must be an absolute path (it is run without a shell)")
            }
            if let first = a.first, first.utf8.count > SettingKey.maxPathBytes {
                return .failure("the program's path is \(first.utf8.count) bytes, longer than a path can be (\(SettingKey.maxPathBytes))")
            }
            return .success(a)
        }
    }
}

extension SettingCheck where Value == String {
    /// One of `allowed`, kept as written.
    static func oneOf(_ allowed: [String]) -> Self {
        text(rule: .oneOf(allowed)) { allowed.contains($0) ? .success($0) : .failure("\(DaemonSettings.show($0)) is not one of \(allowed.joined(separator: ", "))") }
    }

    /// A string `check` finds fine (it returns nil, else what is wrong and the fix), kept as written.
    static func check(_ check: @escaping @Sendable (String) -> String?) -> Self {
        text(rule: .text) { check($0).map { .failure(SettingProblem(stringLiteral: $0)) } ?? .success($0) }
    }
}

extension SettingCheck where Value: CaseIterable & RawRepresentable, Value.RawValue == String {
    /// One of an enumeration's cases, by its raw value.
    static func oneOf(_: Value.Type) -> Self {
        let allowed = Value.allCases.map(\.rawValue)
        return text(rule: .oneOf(allowed)) {
            Value(rawValue: $0).map { .success($0) } ?? .failure("\(DaemonSettings.show($0)) is not one of \(allowed.joined(separator: ", "))")
        }
    }
}

extension SettingCheck {
    /// A string `parse` reads (nil: not a value of the setting; `problem` then says what is
    /// wrong and the fix). `integerToo`: it may be written as an integer (fps = 30).
    static func parse(_ parse: @escaping @Sendable (String) -> Value?, else problem: @escaping @Sendable (String) -> String,
                      integerToo: Bool = false) -> Self {
        text(rule: .text, integerToo: integerToo) { parse($0).map { .success($0) } ?? .failure(SettingProblem(stringLiteral: problem($0))) }
    }

    /// `check`'s value, nil for "" ("" means none: no user, no tune, no metrics file).
    static func noneIfEmpty(_ check: SettingCheck<String>) -> Self where Value == String? {
        Self(rule: check.rule, kind: check.kind) { check.read($0).map { $0.isEmpty ? nil : $0 } }
    }

    /// A string without control characters, then `read`'s.
    private static func text(rule: SettingSpec.Rule, integerToo: Bool = false,
                             _ read: @escaping @Sendable (String) -> Result<Value, SettingProblem>) -> Self {
        Self(rule: rule, kind: integerToo ? .stringOrInt : .string) {
            // fps may have been written as an integer; it arrives as a string.
            guard case let .string(t) = $0 else { return .failure(integerToo ? "expected an integer or a string" : "expected a string") }
            if let c = t.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7f }) {
                let hex = String(c.value, radix: 16, uppercase: true)
                return .failure("\(DaemonSettings.show(t)) contains the control character U+\(String(repeating: "0", count: max(0, 4 - hex.count)) + hex) (remove it)")
            }
            return read(t)
        }
    }
}
