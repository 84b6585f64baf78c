import ReelSystem
import Synchronization

/// Fans `ControlEvent`s out to event-stream subscribers (`events` connections).
///
/// `publish` never blocks on a subscriber: each has a bounded buffer of encoded lines; one that
/// falls `capacity` lines behind gets a final `overflow` line and receives nothing more (the
/// server closes its connection once that line is written). Publishers (the recorder) and the
/// server's I/O thread (`take`) may run on any threads.
public final class EventBus: Sendable {
    /// Default per-subscriber bound, in lines.
    public static let defaultCapacity = 256

    private struct Subscriber {
        var lines: [[UInt8]] = []
        var overflowed = false
    }

    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 1
        var wakers: [@Sendable () -> Void] = []
    }

    public let capacity: Int
    private let state = Mutex(State())

    public init(capacity: Int = defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    /// Called (outside the bus's lock) after every publish, e.g. to wake the server's I/O thread.
    public func addWaker(_ waker: @escaping @Sendable () -> Void) {
        state.withLock { $0.wakers.append(waker) }
    }

    /// A new subscriber; it receives the events published from now on.
    public func subscribe() -> UInt64 {
        state.withLock { s in
            let id = s.nextID
            s.nextID += 1
            s.subscribers[id] = Subscriber()
            return id
        }
    }

    public func unsubscribe(_ id: UInt64) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: id) }
    }

    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Queues `event` for every subscriber; a subscriber whose buffer is full is overflowed instead.
    public func publish(_ event: ControlEvent) {
        guard let line = try? Wire.line(event) else { return }  // our own type: encoding cannot fail
        let wakers: [@Sendable () -> Void] = state.withLock { s in
            guard !s.subscribers.isEmpty else { return [] }
            var overflow: [UInt8]?
            for id in Array(s.subscribers.keys) {
                guard !s.subscribers[id]!.overflowed else { continue }
                if s.subscribers[id]!.lines.count >= capacity {
                    if overflow == nil {
                        overflow = (try? Wire.line(ControlEvent(event: ControlEvent.Kind.overflow, at: Sys.monotonicNs()))) ?? []
                    }
                    s.subscribers[id]!.overflowed = true
                    s.subscribers[id]!.lines.append(overflow!)
                } else {
                    s.subscribers[id]!.lines.append(line)
                }
            }
            return s.wakers
        }
        for wake in wakers { wake() }
    }

    /// The lines queued for subscriber `id`, oldest first. `ended` is true once the subscriber
    /// overflowed (its last line is the `overflow` line): it has been removed from the bus.
    /// An unknown id gives no lines and `ended`.
    public func take(_ id: UInt64) -> (lines: [[UInt8]], ended: Bool) {
        state.withLock { s in
            guard var sub = s.subscribers[id] else { return ([], true) }
            let lines = sub.lines
            if sub.overflowed {
                s.subscribers[id] = nil
                return (lines, true)
            }
            sub.lines = []
            s.subscribers[id] = sub
            return (lines, false)
        }
    }
}
