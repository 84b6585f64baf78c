import Glibc
import ReelCore

/// A pthread mutex with a condition variable: the one blocking primitive the pipeline needs
/// (Synchronization.Mutex has no condition).
/// @unchecked Sendable: the pthread objects are heap-allocated once, never moved, and every
/// access to protected state happens between lock() and unlock().
public final class Monitor: @unchecked Sendable {
    // Unsafe pointers: pthread objects must not move after init, so they live on the heap.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }
    deinit {
        pthread_cond_destroy(cond); pthread_mutex_destroy(mutex)
        cond.deallocate(); mutex.deallocate()
    }
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex); defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
    /// Waits (lock held by the caller, inside withLock) until signalled or `deadline` passes.
    /// Returns false on timeout.
    @discardableResult
    public func wait(until deadline: Nanos?) -> Bool {
        guard let deadline else { pthread_cond_wait(cond, mutex); return true }
        var ts = timespec(tv_sec: Int(deadline / nanosPerSecond), tv_nsec: Int(deadline % nanosPerSecond))
        return pthread_cond_timedwait(cond, mutex, &ts) != ETIMEDOUT
    }
    public func broadcast() { pthread_cond_broadcast(cond) }
}

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

/// A value delivered once, awaited with a deadline.
/// @unchecked Sendable: guarded by `monitor`.
public final class Promise<Value: Sendable>: @unchecked Sendable {
    private let monitor = Monitor()
    private var value: Value?
    public init() {}
    public func fulfill(_ v: Value) { monitor.withLock { if value == nil { value = v; monitor.broadcast() } } }
    public func wait(until deadline: Nanos?) -> Value? {
        monitor.withLock {
            while value == nil { if !monitor.wait(until: deadline) { break } }
            return value
        }
    }
}
