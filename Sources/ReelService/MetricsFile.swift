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
                    logger.warning("metrics_file: \(failure)\(failure.hasPrefix("refusing") ? "" : " (check the directory exists and is writable by reeld; under systemd add it to ReadWritePaths= with 'systemctl edit reeld')")")
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

    /// Writes PATH.tmp and renames it over PATH; nil, or what failed. PATH.tmp is created, never
    /// opened (`Sys.writeFile`: O_EXCL|O_NOFOLLOW), so a link planted there (to a recording, say)
    /// is refused, not written through; rename replaces whatever is at PATH (a link included)
    /// without following it. A PATH.tmp that is a regular file of reeld's own user is what a
    /// crash mid-write left: removed (a name only) and written afresh.
    private func replace(with text: String) -> String? {
        let tmp = path + ".tmp"
        let bytes = Array(text.utf8)
        // Readable by node_exporter's user whatever reeld's umask (reeld.service has UMask=0027).
        var f = bytes.withUnsafeBytes { Sys.writeFile(tmp, $0, mode: 0o644, exactMode: true) }
        if let e = f, !e.created, e.errno == EEXIST, Self.isOwnRegularFile(tmp), unlink(tmp) == 0 {
            f = bytes.withUnsafeBytes { Sys.writeFile(tmp, $0, mode: 0o644, exactMode: true) }
        }
        if let f {
            guard f.created else {
                return Sys.createFailure(tmp, errno: f.errno, fix: "reeld writes the metrics only into a file it creates; see the README's metrics recipe")
            }
            unlink(tmp)
            return "cannot write \(tmp): \(Errno.text(f.errno))"
        }
        if rename(tmp, path) != 0 {
            let why = Errno.current
            unlink(tmp)
            return "cannot rename \(tmp) to \(path): \(why)"
        }
        return nil
    }

    /// A regular file (not a link) owned by the user reeld runs as.
    private static func isOwnRegularFile(_ path: String) -> Bool {
        var st = stat()
        // Unsafe: lstat fills the local stat; the path's C string lives for the call only.
        return lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG && st.st_uid == geteuid()
    }
}
