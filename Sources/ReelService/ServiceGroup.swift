import Dispatch
import Glibc
import Logging
import ReelCore
import ReelSystem

/// reeld's services, started in order and stopped in reverse order, once, within one budget
/// (swift-service-lifecycle's `ServiceGroup`, without async/await: reeld's services are threads).
/// `reeld` and `reeld record` both run their services through it, and both end on SIGTERM or
/// SIGINT through `shutdownOnSignals`.
/// @unchecked Sendable: `started`, `stopping` and `done` are guarded by `monitor`; the rest is
/// immutable after init (the signal sources are only kept alive).
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
    private var signalSources: [DispatchSourceSignal] = []

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

    /// On the first SIGTERM or SIGINT: `announce` (a log line, STOPPING=1), `shutdown()`, then
    /// `after` (exit, for the daemon). Installed before the services start, so a signal that
    /// comes early never kills the process by its default action.
    public func shutdownOnSignals(queue: DispatchQueue, announce: @escaping @Sendable (Int32) -> Void,
                                  after: @escaping @Sendable () -> Void = {}) {
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let src = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            src.setEventHandler { [self] in
                announce(sig)
                shutdown()
                after()
            }
            src.resume()
            monitor.withLock { signalSources.append(src) }
        }
    }
}
