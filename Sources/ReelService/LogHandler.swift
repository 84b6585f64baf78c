import Foundation
import Logging

/// Plain lines on stderr. Under systemd (JOURNAL_STREAM set) each line starts with the sd-daemon
/// priority prefix `<N>` so the journal records its level; in a terminal, a time and level.
public struct ReelLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let journal: Bool

    public init(level: Logger.Level, journal: Bool) { logLevel = level; self.journal = journal }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let level = event.level, message = event.message
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let meta = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let text: String
        if journal {
            text = "<\(Self.priority(level))>\(message)\(meta)\n"
        } else {
            var tv = timeval(); gettimeofday(&tv, nil)
            var t = tv.tv_sec; var tmv = tm(); localtime_r(&t, &tmv)
            let stamp = String(format: "%02d:%02d:%02d.%03d", tmv.tm_hour, tmv.tm_min, tmv.tm_sec, Int(tv.tv_usec / 1000))
            text = "\(stamp) \(level.rawValue.uppercased()) \(message)\(meta)\n"
        }
        // One write(2) per line on fd 2: atomic for lines under PIPE_BUF, no shared FILE state.
        let bytes = Array(text.utf8)
        bytes.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
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
}
