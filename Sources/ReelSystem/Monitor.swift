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
