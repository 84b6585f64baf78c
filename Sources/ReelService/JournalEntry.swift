import CSystemd
import Glibc
import Logging

/// Sends one journal entry, given as `FIELD=value` iovecs; returns 0 or a negative errno, as
/// `sd_journal_sendv` does. Injectable so that tests see the fields without a journal.
public typealias JournalSender = @Sendable (UnsafeBufferPointer<iovec>) -> Int32

public enum JournalSend {
    /// libsystemd's native-protocol client: one datagram to /run/systemd/journal/socket, newlines
    /// inside a value included (one entry, however many lines).
    /// Safe: sd_journal_sendv reads the `count` iovecs (and their bytes) during the call only.
    public static let systemd: JournalSender = { iov in sd_journal_sendv(iov.baseAddress, Int32(iov.count)) }

    /// journald's native socket, which `sd_journal_sendv` writes to.
    public static let socketPath = "/run/systemd/journal/socket"

    /// Whether `path` is a socket this process may send to. `sd_journal_sendv` returns 0 when
    /// the socket is missing ("fail silently if the journal is not available"), so a sandbox
    /// that hides /run/systemd/journal would lose every line: then the `<N>` stderr lines serve.
    public static func reachable(_ path: String = socketPath) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK && access(path, W_OK) == 0
    }
}

/// One journal entry being built: every field's `NAME=value` bytes in one buffer, so that
/// sending costs two allocations and one iovec array on the stack, not one object per field.
struct JournalEntry {
    private(set) var bytes: [UInt8] = []
    private var ends: [Int] = []
    /// Field names the handler sets itself; a metadata key that sanitises to one of them is
    /// sent as `META_<NAME>` so it cannot be mistaken for (or doubled with) the real one.
    static let reserved: Set<String> = ["MESSAGE", "MESSAGE_ID", "PRIORITY", "SYSLOG_IDENTIFIER",
                                        "SYSLOG_FACILITY", "SYSLOG_PID", "CODE_FILE", "CODE_LINE", "CODE_FUNC"]

    init(capacity: Int) {
        bytes.reserveCapacity(capacity)
        ends.reserveCapacity(16)
    }

    /// The entry for one log record: MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_*, then the
    /// metadata as fields, in key order, under sanitised names.
    init(message: String, priority: Int, identifier: String, metadata: Logger.Metadata,
         file: String, function: String, line: UInt) {
        self.init(capacity: message.utf8.count + file.utf8.count + function.utf8.count + 96 + metadata.count * 48)
        append(name: "MESSAGE", value: message)
        append(name: "PRIORITY", value: String(priority))
        append(name: "SYSLOG_IDENTIFIER", value: identifier)
        append(name: "CODE_FILE", value: file)
        append(name: "CODE_LINE", value: String(line))
        append(name: "CODE_FUNC", value: function)
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            guard var name = Self.fieldName(key) else { continue }
            if Self.reserved.contains(name) { name = "META_" + name }
            append(name: name, value: value.description)
        }
    }

    mutating func append(name: String, value: String) {
        bytes.append(contentsOf: name.utf8)
        bytes.append(UInt8(ascii: "="))
        bytes.append(contentsOf: value.utf8)
        ends.append(bytes.count)
    }

    /// The fields as text (tests).
    var fields: [String] {
        var start = 0
        return ends.map { end in defer { start = end }; return String(decoding: bytes[start..<end], as: UTF8.self) }
    }

    /// A journal field name for a metadata key, or nil if nothing of it is usable. journald keeps
    /// only names of A–Z, 0–9 and `_`, not starting with `_` (trusted fields) or a digit, at most
    /// 64 bytes: letters are upper-cased, anything else becomes `_`, leading `_` are dropped, a
    /// leading digit gets an `F` before it, and the name is cut at 64.
    static func fieldName(_ key: String) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(min(key.utf8.count, 64))
        for c in key.utf8 {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): out.append(c)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): out.append(c - 32)
            default:
                if !out.isEmpty { out.append(UInt8(ascii: "_")) }  // a leading `_` would be dropped anyway
            }
        }
        guard let first = out.first else { return nil }
        if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) { out.insert(UInt8(ascii: "F"), at: 0) }
        return String(decoding: out.prefix(64), as: UTF8.self)
    }

    /// Calls `body` with one iovec per field, pointing into `bytes`.
    func withIOVecs<R>(_ body: (UnsafeBufferPointer<iovec>) -> R) -> R {
        bytes.withUnsafeBytes { raw in
            withUnsafeTemporaryAllocation(of: iovec.self, capacity: ends.count) { iov in
                var start = 0
                for (i, end) in ends.enumerated() {
                    // Safe: journald only reads the bytes; `raw` outlives the call of `body`.
                    iov[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + start), iov_len: end - start)
                    start = end
                }
                return body(UnsafeBufferPointer(iov))
            }
        }
    }
}
