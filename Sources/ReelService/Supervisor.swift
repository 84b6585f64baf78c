import Foundation
import Glibc
import Logging
import ReelCore
import ReelSystem

/// The systemd watchdog settings handed to this process: `WATCHDOG_USEC`, and `WATCHDOG_PID`
/// when set must be this process (sd_watchdog_enabled semantics).
public enum WatchdogEnvironment {
    /// The watchdog timeout in ns, or nil when the service manager expects no pings.
    public static func timeoutNs(environment: [String: String], pid: pid_t = getpid()) -> Nanos? {
        guard let usecText = environment["WATCHDOG_USEC"], let usec = Int64(usecText), usec > 0 else { return nil }
        if let p = environment["WATCHDOG_PID"], !p.isEmpty {
            guard let want = Int32(p), want == pid else { return nil }
        }
        return usec * 1000
    }
}

/// A thread that ticks at least once a second and
/// - pings `WATCHDOG=1` every WatchdogSec/2, but only while no watched thread (capture,
///   pipeline) has stalled for `stallNs`; a stall is logged and shown in STATUS=, and the
///   missing pings let systemd kill and restart the daemon (Restart=on-failure);
/// - refreshes `STATUS=` while recording ("recording 00:01:23, 3 segments");
/// - runs `onTick` (storage checks) once a second.
/// @unchecked Sendable: the mutable state below is touched only by the supervisor thread, except
/// `stopping`, which is guarded by `monitor`.
public final class Supervisor: @unchecked Sendable {
    private let notifier: Notifier
    private let status: StatusChannel
    private let health: HealthMonitor
    private let statusLine: @Sendable () -> (line: String, active: Bool)
    private let watchdogNs: Nanos?
    private let stallNs: Nanos
    private let logger: Logger
    private let onTick: @Sendable () -> Void
    /// Runs when threads are first seen stalled (the metrics count it).
    private let onStall: @Sendable () -> Void
    private let monitor = Monitor()
    private var stopping = false
    // Supervisor thread only.
    private var unhealthy = false

    public init(notifier: Notifier, status: StatusChannel, health: HealthMonitor, watchdogNs: Nanos?,
                stallNs: Nanos = 2 * nanosPerSecond, logger: Logger,
                statusLine: @escaping @Sendable () -> (line: String, active: Bool), onTick: @escaping @Sendable () -> Void,
                onStall: @escaping @Sendable () -> Void = {}) {
        self.notifier = notifier
        self.status = status
        self.onTick = onTick
        self.onStall = onStall
        self.health = health
        self.watchdogNs = watchdogNs
        self.stallNs = stallNs
        self.logger = logger
        self.statusLine = statusLine
    }

    public func start() {
        if let w = watchdogNs { logger.info("systemd watchdog enabled: pinging every \(formatDuration(w / 2)) while the pipeline is healthy") }
        NamedThread.start("reel-supervisor") { [self] in run() }
    }

    public func stop() { monitor.withLock { stopping = true; monitor.broadcast() } }

    private func run() {
        let tick: Nanos = min(nanosPerSecond, (watchdogNs ?? 2 * nanosPerSecond) / 2)
        var nextPing = SystemClock.now()
        var next = SystemClock.now()
        while true {
            let quit: Bool = monitor.withLock {
                while !stopping, monitor.wait(until: next) {}
                return stopping
            }
            if quit { return }
            let now = SystemClock.now()
            next = now + tick
            let stalls = health.stalls(now: now, stallNs: stallNs)
            if stalls.isEmpty {
                if unhealthy {
                    unhealthy = false
                    logger.notice("all recording threads are moving again; watchdog pings resumed")
                    status.forget()
                }
                if watchdogNs != nil, now >= nextPing {
                    notifier.send("WATCHDOG=1")
                    nextPing = now + watchdogNs! / 2
                }
            } else if !unhealthy {
                unhealthy = true
                let what = stalls.map { "\($0.name) stalled for \(formatDuration($0.sinceNs))" }.joined(separator: ", ")
                logger.critical("\(what); withholding watchdog pings so systemd restarts reeld")
                onStall()
                status.send("error: \(what)")
            }
            if !unhealthy {
                let (line, active) = statusLine()
                if active { status.sendIfChanged(line) }
            }
            onTick()
        }
    }
}
