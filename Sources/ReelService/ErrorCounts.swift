import Synchronization

/// What went wrong, as `reel_errors_total{kind=...}` counts it.
public enum ErrorKind: String, CaseIterable, Sendable {
    /// A recording could not start (no space, a device missing or busy, ...).
    case start
    /// A camera or microphone failed during a recording (it was finished early).
    case source
    /// A write or sync of the recording failed (disk full, quota, I/O error).
    case storage
    /// Free space fell below min_free_mb during a recording (it was finished).
    case lowSpace = "low_space"
    /// A recording ended with any other error.
    case recording
    /// A capture or pipeline thread stalled (watchdog pings withheld).
    case stall
    /// A SIGHUP reload was refused (the configuration kept).
    case reload
    /// The metrics file could not be written.
    case metrics
    /// A finished recording could not be linked into outbox_dir (it is not queued for upload).
    case outbox
}

/// Errors counted since reeld started, by kind.
public final class ErrorCounts: Sendable {
    private let counts = Mutex<[ErrorKind: Int]>([:])
    public init() {}
    public func count(_ kind: ErrorKind) { counts.withLock { $0[kind, default: 0] += 1 } }
    public var snapshot: [ErrorKind: Int] { counts.withLock { $0 } }
}
