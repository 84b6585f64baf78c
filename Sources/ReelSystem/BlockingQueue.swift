import Glibc
import ReelCore

/// Bounded multi-producer single-consumer queue. Producers choose: `offer` never blocks (live
/// capture threads), `put` waits for room (unpaced sources, where back-pressure is the point).
/// @unchecked Sendable: all state is guarded by `monitor`.
public final class BlockingQueue<Element: Sendable>: @unchecked Sendable {
    private let monitor = Monitor()
    private var items: [Element?]
    private var head = 0, count = 0
    private var closed = false

    public init(capacity: Int) { items = Array(repeating: nil, count: capacity) }

    /// Adds without blocking; false when full or closed.
    public func offer(_ e: Element) -> Bool {
        monitor.withLock {
            guard !closed, count < items.count else { return false }
            items[(head + count) % items.count] = e; count += 1
            monitor.broadcast()
            return true
        }
    }
    /// Adds, waiting for room; false when closed.
    public func put(_ e: Element) -> Bool {
        monitor.withLock {
            while !closed && count == items.count { monitor.wait(until: nil) }
            guard !closed else { return false }
            items[(head + count) % items.count] = e; count += 1
            monitor.broadcast()
            return true
        }
    }
    /// Takes the oldest element, waiting until `deadline`; nil on timeout or when closed and empty.
    public func take(until deadline: Nanos?) -> Element? {
        monitor.withLock {
            while count == 0 && !closed {
                if !monitor.wait(until: deadline) { break }
            }
            guard count > 0 else { return nil }
            let e = items[head]; items[head] = nil
            head = (head + 1) % items.count; count -= 1
            monitor.broadcast()
            return e
        }
    }
    public func close() { monitor.withLock { closed = true; monitor.broadcast() } }
    public var isClosed: Bool { monitor.withLock { closed } }
}
