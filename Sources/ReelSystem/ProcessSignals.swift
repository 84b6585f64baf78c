import Glibc

/// SIGTERM, SIGINT and SIGHUP as events on one thread of Reel's, none ever lost.
///
/// `block()` is the first thing `reeld` does, before any thread exists: the signals are then
/// blocked in every thread (a thread inherits its creator's mask), so one that arrives at any
/// instant stays pending until the `reel-signals` thread takes it with sigwait(3) and hands it to
/// the handler, in order, on that thread. Before, the dispositions were set to SIG_IGN and the
/// signals handed to libdispatch signal sources, which arm themselves asynchronously: a SIGTERM
/// sent right after READY=1 could arrive in between and be ignored, and reeld ran on until
/// systemd's TimeoutStopSec (Tests/e2e/test_signals.py). Programs reeld starts get an empty mask
/// (`FinishHook` sets it with posix_spawnattr_setsigmask).
package enum ProcessSignals {
    package static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP]

    private static func set() -> sigset_t {
        var s = sigset_t()
        sigemptyset(&s)
        for sig in handled { sigaddset(&s, sig) }
        return s
    }

    /// Blocks the handled signals in the calling thread and so in every thread it starts later.
    package static func block() {
        var s = set()
        pthread_sigmask(SIG_BLOCK, &s, nil)
    }

    /// Starts the thread that takes each handled signal as it comes and calls `handler` with it
    /// (on that thread: a handler that takes long, a shutdown, holds the next signal pending).
    package static func handle(_ handler: @escaping @Sendable (Int32) -> Void) {
        NamedThread.start("reel-signals") {
            var s = set()
            while true {
                var sig: Int32 = 0
                if sigwait(&s, &sig) == 0 { handler(sig) }
            }
        }
    }
}
