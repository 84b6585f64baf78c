import Foundation
import Glibc
import Logging
import ReelCore
import ReelMedia
import ReelSystem
import Synchronization

/// `keep_free_mb`: while free space on the output file system is below it, deletes the oldest
/// recordings that have left the outbox (uploaded), one at a time, each logged
/// (REEL_EVENT=deleted), as `Retention` decides. Run by the Supervisor's once-a-second tick, where
/// the disk guard (min_free_mb) measures free space too; when nothing may be deleted it says so
/// once, and the disk guard applies.
public final class RoomKeeper: Sendable {
    /// At most this many deletions per tick (each re-measured): a tick stays short.
    public static let maxPerTick = 16

    private struct State {
        /// Files found without Reel's signature: never deleted, said once.
        var refused: Set<String> = []
        /// "Nothing to free" was said, not again until there is room again.
        var stuck = false
    }
    private let state = Mutex(State())

    public init() {}

    /// One pass: nothing when `dir` has `keepFreeBytes` free. `inProgress`: the final path of the
    /// recording being made, never touched (its `.part` is not a candidate anyway). Returns the
    /// paths deleted.
    @discardableResult
    public func keep(dir: String, outbox: Outbox, keepFreeBytes: Int64, inProgress: String?, logger: Logger) -> [String] {
        guard keepFreeBytes > 0, var free = Storage.freeBytes(dir), free < keepFreeBytes else {
            state.withLock { $0.stuck = false }
            return []
        }
        let dfd = Sys.eintrSafe { open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard dfd >= 0 else { return [] }
        defer { Sys.close(dfd) }
        var entries = Self.list(dfd, outbox: outbox)
        let current = inProgress.map { Outbox.split($0).name }
        var deleted: [String] = []
        for _ in 0..<Self.maxPerTick {
            let refused = state.withLock { $0.refused }
            switch Retention.next(freeBytes: free, keepFreeBytes: keepFreeBytes, entries: entries, inProgress: current, refused: refused) {
            case .enough:
                state.withLock { $0.stuck = false }
                return deleted
            case .nothingToFree:
                let say = state.withLock { s in defer { s.stuck = true }; return !s.stuck }
                if say {
                    logger.warning("keep_free_mb: \(Storage.megabytes(free)) free in \(dir), below \(Storage.megabytes(keepFreeBytes)), but no recording has left the outbox \(outbox.path) (uploaded) to make room; is the uploader running? (min_free_mb still stops recording before the disk is full)")
                }
                return deleted
            case let .delete(e):
                entries.removeAll { $0.name == e.name }
                let path = "\(dir)/\(e.name)"
                guard Self.isReels(dfd, e.name) else {
                    state.withLock { _ = $0.refused.insert(e.name) }
                    logger.notice("keep_free_mb: \(path) does not carry Reel's signature; never deleted (Reel deletes only what it wrote)")
                    continue
                }
                // Looked at again right before: still one link, not queued, no hand-off under way.
                guard let again = Self.entry(dfd, e.name, outbox: outbox), Retention.deletable(again, inProgress: current),
                      unlinkat(dfd, e.name, 0) == 0 else { continue }
                let before = free
                free = Storage.freeBytes(dir) ?? free
                deleted.append(path)
                logger.notice("keep_free_mb: deleted \(path) (\(e.bytes) bytes, uploaded: no longer in the outbox) to keep \(Storage.megabytes(keepFreeBytes)) free; \(Storage.megabytes(free)) free now",
                              metadata: RecordingLog.fields(.deleted, file: path, more: ["REEL_FREED_BYTES": "\(e.bytes)", "REEL_FREE_BYTES": "\(free)"]))
                // Space held by a reader still open (a download): it comes back when closed. Wait
                // for the next tick rather than delete more for it.
                if free <= before { return deleted }
            }
        }
        return deleted
    }

    /// The output directory's entries that could be recordings (`*.mp4`, not hidden).
    static func list(_ dfd: Int32, outbox: Outbox) -> [RetentionEntry] {
        (Sys.directoryNames(dfd)?.names ?? []).filter { $0.hasSuffix(".mp4") && !$0.hasPrefix(".") }.compactMap { entry(dfd, $0, outbox: outbox) }
    }

    static func entry(_ dfd: Int32, _ name: String, outbox: Outbox) -> RetentionEntry? {
        var st = stat(), marker = stat()
        guard fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return RetentionEntry(name: name, bytes: Int64(st.st_size),
                              modifiedNs: Sys.nanos(st.st_mtim),
                              isRegular: st.st_mode & S_IFMT == S_IFREG, links: Int(st.st_nlink),
                              inOutbox: outbox.holds(name),
                              handoffPending: fstatat(dfd, ".\(name)\(Handoff.markerSuffix)", &marker, AT_SYMLINK_NOFOLLOW) == 0
                                  || fstatat(dfd, ".\(name)\(Handoff.unqueuedSuffix)", &marker, AT_SYMLINK_NOFOLLOW) == 0)
    }

    /// Whether `name` carries Reel's signature (`PartSignature`; `PartWalk`: a finished or a
    /// playable fragmented file of Reel's), opened without following a link.
    static func isReels(_ dfd: Int32, _ name: String) -> Bool {
        let fd = Sys.eintrSafe { openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard fd >= 0 else { return false }
        defer { Sys.close(fd) }
        switch try? Storage.partContents(fd: fd, path: name) {
        case .finished?, .playable?: return true
        default: return false
        }
    }
}
