import Foundation
import Glibc
import Logging
import ReelControl
import ReelCore
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
}

/// Errors counted since reeld started, by kind.
public final class ErrorCounts: Sendable {
    private let counts = Mutex<[ErrorKind: Int]>([:])
    public init() {}
    public func count(_ kind: ErrorKind) { counts.withLock { $0[kind, default: 0] += 1 } }
    public var snapshot: [ErrorKind: Int] { counts.withLock { $0 } }
}

/// How long the last fragment sync (fdatasync of the recording) took. Process-wide, because
/// reeld records one file at a time and the syncer belongs to the session; -1: none yet.
public enum SyncLatency {
    private static let lastNs = Atomic<Int64>(-1)
    public static var last: Nanos? { let v = lastNs.load(ordering: .relaxed); return v < 0 ? nil : v }
    static func record(_ ns: Nanos) { lastNs.store(ns, ordering: .relaxed) }
}

/// reeld's state in the Prometheus text exposition format (version 0.0.4), for
/// node_exporter's textfile collector.
public enum PrometheusText {
    public static let buildLabels: [(String, String)] = {
        #if compiler(>=6.2)
        let swift = "6.2"
        #elseif compiler(>=6.1)
        let swift = "6.1"
        #else
        let swift = "6.0"
        #endif
        return [("protocol_version", String(protocolVersion)), ("swift", swift)]
    }()

    public static func render(_ st: StatusInfo, errors: [ErrorKind: Int], syncLatencyNs: Nanos?) -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for s in samples { out += "\(name)\(s.labels) \(s.value)\n" }
        }
        func seconds(_ ns: Nanos) -> String { String(format: "%.6f", Double(ns) / 1e9) }
        metric("reel_state", "gauge", "reeld's recorder state: 1 for the current one, 0 for the others.",
               RecorderState.allCases.map { ("{state=\"\($0.rawValue)\"}", $0 == st.state ? "1" : "0") })
        metric("reel_recorded_seconds", "gauge", "Media recorded in the current recording, pauses left out (0 when idle).",
               [("", seconds(st.recordedNs))])
        metric("reel_frames", "gauge", "Video frames written in the current recording.", [("", String(st.frames))])
        metric("reel_dropped_frames", "gauge", "Video frames lost in the current recording (camera, full queue or pool).",
               [("", String(st.droppedFrames))])
        metric("reel_audio_filled_samples", "gauge", "Audio samples filled with silence in the current recording (overruns, gaps).",
               [("", String(st.audioFilledSamples))])
        metric("reel_bytes_written", "gauge", "Bytes of the current recording's MP4 written so far.", [("", String(st.bytesWritten ?? 0))])
        if let free = st.freeBytes {
            metric("reel_free_bytes", "gauge", "Free bytes in the output directory's file system.", [("", String(free))])
        }
        if let ns = syncLatencyNs {
            metric("reel_fragment_sync_seconds", "gauge", "How long the last fragment's sync to disk (fdatasync) took.", [("", seconds(ns))])
        }
        metric("reel_errors_total", "counter", "Errors since reeld started, by kind.",
               ErrorKind.allCases.map { ("{kind=\"\($0.rawValue)\"}", String(errors[$0] ?? 0)) })
        metric("reel_uptime_seconds", "gauge", "Seconds since reeld started.", [("", seconds(st.uptimeNs))])
        let labels = buildLabels.map { "\($0.0)=\"\($0.1)\"" }.joined(separator: ",")
        metric("reel_build_info", "gauge", "reeld's build: always 1, its labels name the build.", [("{\(labels)}", "1")])
        return out
    }
}

/// Writes the metrics file atomically: PATH.tmp in the same directory, then rename (the
/// textfile collector reads only *.prom, so it never sees the temporary file). A failure is
/// logged when it first happens and when it changes, not every second, and counted.
public final class MetricsFile: Sendable {
    public let path: String
    private let logger: Logger
    private let errors: ErrorCounts
    /// The last failure, and whether `remove` ran; held while writing, so a write in progress
    /// cannot bring the file back after `remove`.
    private let state = Mutex<(lastFailure: String?, removed: Bool)>((nil, false))

    public init(path: String, logger: Logger, errors: ErrorCounts) {
        self.path = path
        self.logger = logger
        self.errors = errors
    }

    public func write(_ text: String) {
        state.withLock { state in
            guard !state.removed else { return }
            let failure = replace(with: text)
            if let failure {
                errors.count(.metrics)
                if failure != state.lastFailure {
                    logger.warning("metrics_file: \(failure) (check the directory exists and is writable by reeld; under systemd add it to ReadWritePaths= with 'systemctl edit reeld')")
                }
            } else if state.lastFailure != nil {
                logger.notice("metrics_file: writing \(path) again")
            }
            state.lastFailure = failure
        }
    }

    /// Removes the file for good (reeld is stopping: no file, no reeld).
    public func remove() {
        state.withLock { state in
            state.removed = true
            unlink(path)
        }
    }

    /// Writes PATH.tmp and renames it over PATH; nil, or what failed.
    private func replace(with text: String) -> String? {
        let tmp = path + ".tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return "cannot create \(tmp): \(String(cString: strerror(errno)))" }
        // Readable by node_exporter's user whatever reeld's umask (reeld.service has UMask=0027).
        fchmod(fd, 0o644)
        var failure: String?
        let bytes = Array(text.utf8)
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { failure = "cannot write \(tmp): \(String(cString: strerror(errno)))"; break }
            off += n
        }
        close(fd)
        if failure == nil, rename(tmp, path) != 0 {
            failure = "cannot rename \(tmp) to \(path): \(String(cString: strerror(errno)))"
        }
        if failure != nil { unlink(tmp) }
        return failure
    }
}
