import Foundation
import Glibc
import Logging
import ReelCore
import ReelSystem

/// When a recording's bytes are forced from the page cache to the disk (`fsync` in the config).
public enum FsyncPolicy: String, Sendable, CaseIterable {
    /// After every fragment (each 0.5 s of media) the file's data is synced by a thread of its
    /// own, so a power cut loses at most the fragment being written plus one in flight. The
    /// directory is synced after the file is created and after the final rename.
    case fragment
    /// Never: the kernel writes back when it likes (ext4: up to ~30 s later). A power cut can
    /// lose that much, or the whole file if it was never written back.
    case none
}

/// Syncs one file to the disk off the pipeline thread: `request()` never blocks, and requests
/// that arrive while a sync runs are coalesced into the next one. fsync works on the inode, so
/// this thread's own read-only descriptor syncs what libavformat wrote through its descriptor.
/// @unchecked Sendable: mutable state is guarded by `monitor`; `fd` is set once in init.
package final class FileSyncer: @unchecked Sendable {
    package let path: String
    private let logger: Logger
    private let monitor = Monitor()
    private var pending = false
    private var closed = false
    private var exited = false
    private let fd: Int32
    // Guarded by monitor.
    private(set) var syncs = 0
    private(set) var totalNs: Nanos = 0
    private(set) var maxNs: Nanos = 0
    private var firstError: Int32?

    /// The errno of the first failed sync (EIO, ENOSPC, EDQUOT), if any: the pipeline ends the
    /// recording on it as on a failed write.
    package var failure: Int32? { monitor.withLock { firstError } }

    /// Opens `path` (already created by the writer) and starts the sync thread, whose first job
    /// is to sync the directory so the new file's entry survives a power cut.
    package init(path: String, logger: Logger) throws {
        self.path = path
        self.logger = logger
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw RecorderFailure("cannot open \(path) to sync it to disk: \(Errno.current)")
        }
        NamedThread.start("reel-fsync") { [self] in loop() }
    }

    /// Asks for a sync of everything written so far. Never blocks on the disk.
    package func request() {
        monitor.withLock { pending = true; monitor.broadcast() }
    }

    /// Runs a last sync of everything written, waits for the thread and closes the descriptor.
    /// Returns (syncs, mean ns, max ns) for the log.
    @discardableResult
    package func close() -> (count: Int, meanNs: Nanos, maxNs: Nanos) {
        monitor.withLock {
            pending = true; closed = true; monitor.broadcast()
            while !exited { monitor.wait(until: nil) }
        }
        Glibc.close(fd)
        return monitor.withLock { (syncs, syncs > 0 ? totalNs / Nanos(syncs) : 0, maxNs) }
    }

    private func loop() {
        Self.syncDirectory(of: path, logger: logger)
        while true {
            let (work, last) = monitor.withLock { () -> (Bool, Bool) in
                while !pending && !closed { monitor.wait(until: nil) }
                let w = pending
                pending = false
                return (w, closed)
            }
            if work { syncOnce() }
            if last { break }
        }
        monitor.withLock { exited = true; monitor.broadcast() }
    }

    private func syncOnce() {
        let t0 = SystemClock.now()
        let rc = Sys.eintrSafe { fdatasync(fd) }
        let err = rc == 0 ? 0 : errno
        let dt = SystemClock.now() - t0
        SyncLatency.record(dt)
        let report = monitor.withLock { () -> Bool in
            syncs += 1; totalNs += dt; maxNs = max(maxNs, dt)
            if err != 0 && firstError == nil { firstError = err; return true }
            return false
        }
        if report {
            logger.error("cannot sync \(path) to disk: \(Errno.text(err)); the recording ends at its last complete fragment")
        }
    }

    /// fsync of the directory holding `path`, so a created or renamed entry survives a power cut.
    package static func syncDirectory(of path: String, logger: Logger) {
        let dir = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let dfd = open(dir.isEmpty ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else {
            logger.warning("cannot open directory \(dir) to sync it: \(Errno.current)")
            return
        }
        defer { Glibc.close(dfd) }
        let rc = Sys.eintrSafe { fsync(dfd) }
        if rc != 0 { logger.warning("cannot sync directory \(dir): \(Errno.current)") }
    }
}

/// An advisory lock (flock) on a recording's `.part` file for as long as it is being written, so
/// startup recovery in another reeld sharing the directory leaves it alone (`Storage.recover`
/// probes it with a shared flock on its own descriptor).
package final class PartFileLock {
    private var fd: Int32

    /// Locks `path` (already created by the writer). A failure to lock is not fatal to the
    /// recording: it is logged, and only cross-daemon recovery loses its protection.
    package init(path: String, logger: Logger) {
        fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 {
            logger.warning("cannot lock \(path) against recovery by another reeld: \(Errno.current)")
        }
    }

    /// Releases the lock (after the final rename). Idempotent.
    package func release() {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
    }

    deinit { release() }
}
