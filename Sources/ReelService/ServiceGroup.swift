import Glibc
import Logging
import ReelCore
import ReelSystem

/// reeld's services, started in order and stopped in reverse order, once, within one budget
/// (swift-service-lifecycle's `ServiceGroup`, without async/await: reeld's services are threads).
/// `reeld` and `reeld record` both run their services through it, and both end on SIGTERM or
/// SIGINT (`reeld record` on SIGHUP too) through `shutdownOnSignals`.
/// @unchecked Sendable: `started`, `stopping` and `done` are guarded by `monitor`; the rest is
/// immutable after init.
public final class ServiceGroup: @unchecked Sendable {
    public struct Service: Sendable {
        public let name: String
        let start: @Sendable () throws -> Void
        let stop: @Sendable (_ deadline: Nanos) -> Void

        /// `stop` gets the instant by which the whole shutdown must be over.
        public init(_ name: String, start: @escaping @Sendable () throws -> Void = {},
                    stop: @escaping @Sendable (_ deadline: Nanos) -> Void = { _ in }) {
            self.name = name
            self.start = start
            self.stop = stop
        }
    }

    /// The whole shutdown (finishing the recording, waiting for on_finish programs, closing the
    /// socket) ends within this: 10 s under reeld.service's TimeoutStopSec=150s, after which
    /// systemd would SIGKILL reeld mid-file. A unit test holds the unit file to it.
    public static let shutdownBudgetNs: Nanos = 140 * nanosPerSecond

    private let services: [Service]
    private let logger: Logger
    private let budgetNs: Nanos
    private let monitor = Monitor()
    private var started = 0
    private var stopping = false
    private var done = false

    public init(_ services: [Service], logger: Logger, budgetNs: Nanos = ServiceGroup.shutdownBudgetNs) {
        self.services = services
        self.logger = logger
        self.budgetNs = budgetNs
    }

    /// Starts each service in order. If one fails, those already started are stopped in reverse
    /// and the error is rethrown.
    public func start() throws {
        for s in services {
            if monitor.withLock({ stopping }) { return }
            do { try s.start() } catch {
                logger.debug("service \(s.name) failed to start: \(error)")
                shutdown()
                throw error
            }
            monitor.withLock { started += 1 }
        }
    }

    /// Returns once the group has been shut down (by a signal, through `shutdownOnSignals`): the
    /// daemon's main thread waits here, with the signals still blocked. (`dispatchMain()` did
    /// not: it parks the main thread in sigsuspend with an empty mask, where a SIGTERM took its
    /// default action and killed reeld mid-recording.)
    public func waitUntilStopped() {
        monitor.withLock { while !done { _ = monitor.wait(until: nil) } }
    }

    /// Stops the started services in reverse order, each told the deadline (now + budget). The
    /// first call does the work; a concurrent or later call waits until it is done.
    public func shutdown() {
        let (first, count): (Bool, Int) = monitor.withLock {
            if stopping { return (false, 0) }
            stopping = true
            return (true, started)
        }
        guard first else {
            monitor.withLock { while !done { _ = monitor.wait(until: nil) } }
            return
        }
        let deadline = SystemClock.now() + budgetNs
        for s in services.prefix(count).reversed() { s.stop(deadline) }
        monitor.withLock { done = true; monitor.broadcast() }
    }

    /// On SIGTERM or SIGINT (and on SIGHUP when `hangup` is nil): `announce` (a log line,
    /// STOPPING=1), `shutdown()`, then `after` (exit, for the daemon); a later one finds the
    /// group stopped. On SIGHUP, `hangup` when given (a reload). The signals are taken by
    /// `ProcessSignals`' thread; `ProcessSignals.block()` must have run first thing in main, so a
    /// signal that comes at any instant, even before this is called, is acted on, never lost.
    public func shutdownOnSignals(announce: @escaping @Sendable (Int32) -> Void, after: @escaping @Sendable () -> Void = {},
                                  hangup: (@Sendable () -> Void)? = nil) {
        ProcessSignals.handle { [self] sig in
            if sig == SIGHUP, let hangup { hangup(); return }
            announce(sig)
            shutdown()
            after()
        }
    }
}
