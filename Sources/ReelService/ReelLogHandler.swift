import Foundation
import Logging
import ReelSystem
import Synchronization

/// reeld's log. Under systemd (stderr is the journal: `JournalStream.isStderr`) each record is
/// one journal entry sent with `sd_journal_sendv`: MESSAGE (however many lines), PRIORITY,
/// SYSLOG_IDENTIFIER, CODE_FILE/LINE/FUNC and the metadata as fields (`REEL_EVENT`, `REEL_FILE`,
/// ...: `RecordingLog`). If that fails, and otherwise, plain lines on stderr: under systemd
/// with the sd-daemon priority prefix `<N>`, in a terminal with a time and level. The stderr
/// lines carry the metadata as ` key=value` except `REEL_*` fields, which only restate the
/// message for the journal's queries.
public struct ReelLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let journal: Bool
    private let sender: JournalSender?
    private let fd: Int32
    private let identifier: String

    /// `journal`: stderr is the journal; records then go to it natively (`sd_journal_sendv`)
    /// if its socket is there (else the `<N>` lines, said once).
    public init(level: Logger.Level, journal: Bool) {
        let native = journal && JournalSend.reachable()
        if journal && !native { Self.sayFallbackOnce("\(JournalSend.socketPath) is not there to send to", fd: 2) }
        self.init(level: level, journal: journal, sender: native ? JournalSend.systemd : nil)
    }

    /// `sender` (tests): where journal entries go instead of the journal; nil writes `<N>` lines
    /// to `fd` (when `journal`). `fd`: the stderr stream.
    init(level: Logger.Level, journal: Bool, sender: JournalSender?, fd: Int32 = 2, identifier: String = "reeld") {
        logLevel = level; self.journal = journal; self.sender = sender; self.fd = fd; self.identifier = identifier
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let level = event.level, message = event.message
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        if journal, let sender {
            let entry = JournalEntry(message: message.description, priority: Self.priority(level), identifier: identifier,
                                     metadata: all, file: event.file, function: event.function, line: event.line)
            let rc = entry.withIOVecs(sender)
            if rc >= 0 { return }
            Self.sayFallbackOnce("the journal refused a log entry (sd_journal_sendv: \(Errno.text(-rc)))", fd: fd)
        }
        let shown = all.filter { !$0.key.hasPrefix("REEL_") }
        let meta = shown.isEmpty ? "" : " " + shown.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        // One record, one line: what a device or file name carries cannot start a line of its own.
        let body = Self.oneLine("\(message)\(meta)")
        let text: String
        if journal {
            text = "<\(Self.priority(level))>\(body)\n"
        } else {
            var tv = timeval(); gettimeofday(&tv, nil)
            var t = tv.tv_sec; var tmv = tm(); localtime_r(&t, &tmv)
            let stamp = String(format: "%02d:%02d:%02d.%03d", tmv.tm_hour, tmv.tm_min, tmv.tm_sec, Int(tv.tv_usec / 1000))
            text = "\(stamp) \(level.rawValue.uppercased()) \(body)\n"
        }
        Self.write(text, fd: fd)
    }

    /// `text` with its control characters escaped, so it stays one line: `\n`, `\r`, `\t` as
    /// such, other C0 and DEL as `\xHH`, C1 as `\u{HH}`.
    static func oneLine(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = String.UnicodeScalarView()
        for u in text.unicodeScalars {
            guard isControl(u) else { out.append(u); continue }
            let escaped: String
            switch u {
            case "\n": escaped = "\\n"
            case "\r": escaped = "\\r"
            case "\t": escaped = "\\t"
            default:
                let hex = String(u.value, radix: 16)
                escaped = u.value < 0x80 ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{\(hex)}"
            }
            out.append(contentsOf: escaped.unicodeScalars)
        }
        return String(out)
    }

    private static func isControl(_ u: Unicode.Scalar) -> Bool { u.value < 0x20 || (0x7f...0x9f).contains(u.value) }

    /// One write(2) per line: atomic for lines under PIPE_BUF, no shared FILE state.
    private static func write(_ text: String, fd: Int32) {
        let bytes = Array(text.utf8)
        // Safe: write(2) reads `count` bytes of the array during the call.
        bytes.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    private static let fellBack = Atomic<Bool>(false)

    /// The first time the journal cannot be used, says why (once) on stderr, at warning.
    private static func sayFallbackOnce(_ why: String, fd: Int32) {
        guard !fellBack.exchange(true, ordering: .relaxed) else { return }
        write("<4>\(why); logging to stderr with <N> priority prefixes instead, without journal fields\n", fd: fd)
    }

    static func priority(_ l: Logger.Level) -> Int {
        switch l {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    /// The swift-log level for a syslog priority (FFmpeg's and x264's lines, `LibraryLog`);
    /// `priority(_:)` maps it back (0 and 1 become 2, critical).
    static func level(syslogPriority p: Int32) -> Logger.Level {
        switch p {
        case ...2: return .critical
        case 3: return .error
        case 4: return .warning
        case 5: return .notice
        case 6: return .info
        default: return .debug
        }
    }
}
