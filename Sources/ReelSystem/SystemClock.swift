import Glibc
import ReelCore

/// CLOCK_MONOTONIC: the one clock every timestamp in Reel is on.
public struct SystemClock: MonotonicClock {
    public init() {}
    public func now() -> Nanos { Self.now() }
    public static func now() -> Nanos {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Nanos(ts.tv_sec) * nanosPerSecond + Nanos(ts.tv_nsec)
    }
    /// Sleeps until the absolute instant `t` (pacing a synthetic source, not synchronisation).
    public static func sleep(until t: Nanos) {
        var ts = timespec(tv_sec: Int(t / nanosPerSecond), tv_nsec: Int(t % nanosPerSecond))
        // Unsafe: clock_nanosleep reads the local timespec; no remainder is asked for (nil).
        Sys.eintrSafe(returnsErrno: true) { clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) }
    }
}
