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
/// checked; reeld refuses any table but `[camera.controls]` (and `[button]`, reel-button's, which it skips), as an unknown key or a value of the wrong type.
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

    /// The root table's keys with their values and the lines where they are first defined, in
    /// the order they first appear.
    public var rootEntries: [(key: String, value: Value, line: Int)] {
        keys.compactMap { key in entries[key].map { (key, $0.value, $0.line) } }
    }

    /// Whether root `key` is a table opened by a `[key...]` header or a dotted key (whose
    /// entries are in `tableEntries`), not an inline `{...}` value or an array of tables.
    public func isOpenTable(_ key: String) -> Bool { entries[key]?.openTable ?? false }

    /// The line where `key` is first defined (its `key = ...`, `key.x = ...` or `[key...]`).
    public func line(of key: String) -> Int? { entries[key]?.line }

    /// A byte order mark at the start of `text` is skipped (as toml++ did); any other U+FEFF is
    /// a syntax error.
    public init(parsing text: String) throws(SyntaxError) {
        var reader = TOMLReader(Array(text.utf8))
        try reader.document(into: &self)
    }

    mutating func addTableEntry(table: [String], key: [String], value: Value, line: Int) {
        tableEntries.append(TableEntry(table: table, key: key, value: value, line: line))
    }

    /// Records `inner` as one of root table `key`'s own keys.
    mutating func addTableKey(_ key: String, _ inner: String) {
        guard entries[key]?.value.type == .table, !entries[key]!.value.tableKeys.contains(inner) else { return }
        entries[key]!.value.tableKeys.append(inner)
    }

    /// Defines root `key` (a whole key path at the root, or the first part of a dotted key or a
    /// header), refusing what TOML forbids at the root: a key set twice, or a value extended as a
    /// table.
    mutating func define(_ path: [String], _ value: Value?, arrayHeader: Bool, line: Int) -> String? {
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
