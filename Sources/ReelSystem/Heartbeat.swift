import Foundation
import Glibc
import ReelCore
import Synchronization

/// One thread's proof of life: the CLOCK_MONOTONIC instant of its last beat.
public final class Heartbeat: Sendable {
    public let name: String
    private let last: Atomic<Int64>

    init(name: String, now: Nanos) {
        self.name = name
        last = Atomic(now)
    }

    /// Called by the owning thread each time round its loop; one relaxed atomic store.
    public func beat() { last.store(SystemClock.now(), ordering: .relaxed) }
    public var lastBeat: Nanos { last.load(ordering: .relaxed) }
}

/// The threads that must keep moving while a recording runs (capture threads, the pipeline
/// thread). The supervisor pings the systemd watchdog only while none of them has stalled, so a
/// stuck thread gets the daemon restarted instead of recording nothing for hours.
public final class HealthMonitor: Sendable {
    public struct Stall: Sendable, Equatable {
        public var name: String
        public var sinceNs: Nanos
    }

    private let beats = Mutex<[ObjectIdentifier: Heartbeat]>([:])

    public init() {}

    /// A new heartbeat counted as beating now; it is watched until `unregister`.
    public func register(_ name: String) -> Heartbeat {
        let hb = Heartbeat(name: name, now: SystemClock.now())
        beats.withLock { $0[ObjectIdentifier(hb)] = hb }
        return hb
    }

    public func unregister(_ hb: Heartbeat?) {
        guard let hb else { return }
        _ = beats.withLock { $0.removeValue(forKey: ObjectIdentifier(hb)) }
    }

    /// The registered threads that have not beaten for longer than `stallNs`, oldest first.
    public func stalls(now: Nanos, stallNs: Nanos) -> [Stall] {
        beats.withLock { b in
            b.values.compactMap { hb in
                let age = now - hb.lastBeat
                return age > stallNs ? Stall(name: hb.name, sinceNs: age) : nil
            }
        }.sorted { $0.sinceNs > $1.sinceNs }
    }

    public var watchedNames: [String] { beats.withLock { $0.values.map(\.name).sorted() } }
}
