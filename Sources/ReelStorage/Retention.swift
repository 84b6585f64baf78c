import ReelCore

/// One entry of the output directory as `keep_free_mb` sees it (from lstat: never followed).
public struct RetentionEntry: Equatable, Sendable {
    public var name: String
    public var bytes: Int64
    /// Modification time (wall clock ns): when the recording was finished.
    public var modifiedNs: Nanos
    public var isRegular: Bool
    /// st_nlink: 2 while OUTBOX/NAME (or any other name) still links it.
    public var links: Int
    /// OUTBOX/NAME exists (whatever it is): the recording is waiting for upload.
    public var inOutbox: Bool
    /// `.NAME.handoff` exists: its hand-off (outbox link, on_finish) is not over; or
    /// `.NAME.unqueued`: its link failed, it was never queued.
    public var handoffPending: Bool

    public init(name: String, bytes: Int64, modifiedNs: Nanos, isRegular: Bool = true, links: Int = 1,
                inOutbox: Bool = false, handoffPending: Bool = false) {
        self.name = name; self.bytes = bytes; self.modifiedNs = modifiedNs; self.isRegular = isRegular
        self.links = links; self.inOutbox = inOutbox; self.handoffPending = handoffPending
    }
}

/// `keep_free_mb`'s decision, a pure value: which recording to delete next, or that there is room
/// enough, or that nothing may be deleted. `RoomKeeper` lists the directory, asks, deletes one
/// file, measures again and asks again.
///
/// Only a finished recording that has left the outbox may go: a regular `NAME.mp4` (not hidden,
/// not a `.part`, not the recording in progress) with one link, no OUTBOX/NAME and no hand-off
/// or unqueued marker, and not `refused` (the caller found it is not Reel's: no signature). Oldest first
/// (modification time, then name).
public enum Retention {
    public enum Decision: Equatable, Sendable {
        /// Free space is at or above keep_free_mb.
        case enough
        /// Delete this one, then measure again.
        case delete(RetentionEntry)
        /// Below keep_free_mb, and every recording still waits, is in progress or is not Reel's:
        /// the disk guard (min_free_mb) applies.
        case nothingToFree
    }

    /// Whether `e` may ever be deleted (`inProgress`: the recording's final name, or nil).
    public static func deletable(_ e: RetentionEntry, inProgress: String?, refused: Set<String> = []) -> Bool {
        e.isRegular && e.links == 1 && !e.inOutbox && !e.handoffPending
            && e.name.hasSuffix(".mp4") && e.name.utf8.count > 4 && !e.name.hasPrefix(".")
            && e.name != inProgress && !refused.contains(e.name)
    }

    public static func next(freeBytes: Int64, keepFreeBytes: Int64, entries: [RetentionEntry], inProgress: String?,
                            refused: Set<String> = []) -> Decision {
        guard freeBytes < keepFreeBytes else { return .enough }
        let oldest = entries.filter { deletable($0, inProgress: inProgress, refused: refused) }
            .min { ($0.modifiedNs, $0.name) < ($1.modifiedNs, $1.name) }
        return oldest.map(Decision.delete) ?? .nothingToFree
    }
}
