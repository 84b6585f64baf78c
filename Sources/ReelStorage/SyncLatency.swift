import ReelCore
import Synchronization

/// How long the last fragment sync (fdatasync of the recording) took. Process-wide, because
/// reeld records one file at a time and the syncer belongs to the session; -1: none yet.
public enum SyncLatency {
    private static let lastNs = Atomic<Int64>(-1)
    public static var last: Nanos? { let v = lastNs.load(ordering: .relaxed); return v < 0 ? nil : v }
    package static func record(_ ns: Nanos) { lastNs.store(ns, ordering: .relaxed) }
}
