import Foundation
import Glibc
import Logging
import ReelSystem
import Synchronization

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
        var failure: String?
        // Readable by node_exporter's user whatever reeld's umask (reeld.service has UMask=0027).
        if let f = Array(text.utf8).withUnsafeBytes({ Sys.writeFile(tmp, $0, mode: 0o644, exactMode: true) }) {
            guard f.created else { return "cannot create \(tmp): \(Errno.text(f.errno))" }
            failure = "cannot write \(tmp): \(Errno.text(f.errno))"
        }
        if failure == nil, rename(tmp, path) != 0 {
            failure = "cannot rename \(tmp) to \(path): \(Errno.current)"
        }
        if failure != nil { unlink(tmp) }
        return failure
    }
}
