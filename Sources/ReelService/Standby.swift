import Foundation
import Logging
import ReelCapture
import ReelControl
import ReelCore
import ReelPipeline
import ReelSystem
import Synchronization

/// `standby = true`: keeps the camera and microphone open and streaming while idle, so that a
/// `start` records from the next frame. Owns the warm `LiveSources` between recordings, lends
/// them to a recording and takes them back; one thread opens them, and opens them again after a
/// failure (camera unplugged) with the delays `StandbyState` decides. Nothing is encoded or
/// stored while idle: every slot goes straight back to its pool (`LiveSources`).
/// @unchecked Sendable: the state and the sources are guarded by `monitor`; opening and closing
/// happen on the standby thread (closing also at shutdown), outside the lock.
final class Standby: @unchecked Sendable {
    private let monitor = Monitor()
    private var state: StandbyState
    private var config: RecorderConfig
    private var sources: LiveSources?
    /// Sources to close on the standby thread (replaced or failed).
    private var retired: [LiveSources] = []
    private var closing = false
    private let logger: Logger
    /// The camera controls to apply at each open: the config's, then `reelctl set`'s.
    private let controls: @Sendable (RecorderConfig) -> [CameraControlAssignment]
    /// Called when the state changes (status, STATUS=).
    var onChange: (@Sendable () -> Void)?

    /// Where the warm sources meter levels and hand preview frames (`LiveSources.feed`).
    private let feed: LiveFeed?

    init(config: RecorderConfig, logger: Logger, feed: LiveFeed? = nil, controls: @escaping @Sendable (RecorderConfig) -> [CameraControlAssignment]) {
        self.feed = feed
        self.config = config
        self.logger = logger
        self.controls = controls
        state = StandbyState(enabled: config.standby && LiveSources.canBeWarm(config), now: SystemClock.now())
    }

    /// Starts the standby thread (it opens the sources at once when standby is on).
    func start() {
        NamedThread.start("reel-standby") { [self] in run() }
    }

    /// Closes the warm sources and ends the thread (shutdown).
    func shutdown() {
        let s: [LiveSources] = monitor.withLock {
            closing = true
            monitor.broadcast()
            defer { sources = nil; retired = [] }
            return retired + [sources].compactMap { $0 }
        }
        s.forEach { $0.stop() }
    }

    /// New settings (SIGHUP): warm sources whose settings changed are closed and opened again
    /// (now when idle, after the recording otherwise).
    func reconfigure(_ c: RecorderConfig) {
        monitor.withLock {
            let changed = Self.sourcesKey(c) != Self.sourcesKey(config)
            config = c
            let enabled = c.standby && LiveSources.canBeWarm(c)
            if state.reconfigured(enabled: enabled, sourcesChanged: changed, now: SystemClock.now()), let s = sources {
                retired.append(s)
                sources = nil
            }
            monitor.broadcast()
        }
        onChange?()
    }

    /// The sources' identity: a change reopens them.
    /// (A new pre-roll too: the pools are sized for it at open.)
    private static func sourcesKey(_ c: RecorderConfig) -> String { "\(c.videoDescription)|\(c.audioDescription)|\(c.paced)|\(c.preRoll)" }

    /// For `start`: the warm sources (lent until `giveBack`), nil when standby is off (open them
    /// as usual), or the error a `start` gets. Waits (until `deadline`) for an open under way.
    func borrow(until deadline: Nanos) -> Result<LiveSources, ControlErrorText>? {
        monitor.withLock {
            while true {
                switch state.start(now: SystemClock.now()) {
                case .cold: return nil
                case .borrow: return .success(sources!)
                case let .refuse(why): return .failure(ControlErrorText(why))
                case .wait:
                    guard monitor.wait(until: deadline) else {
                        return .failure(ControlErrorText("standby: the devices are still being opened (try again in a moment; 'reelctl status' shows when they are warm)"))
                    }
                }
            }
        }
    }

    /// A recording (or a start that failed) gives the sources back: kept warm, or closed and
    /// opened again after a failure (or new settings). Returns true when they failed (the caller
    /// reports it, outside its own lock: this never calls back).
    @discardableResult
    func giveBack(_ s: LiveSources) -> Bool {
        monitor.withLock {
            let failure = s.failure ?? (s.hasExited ? "a capture source stopped" : nil)
            if state.returned(failure: failure, now: SystemClock.now()) {
                retired.append(s)
                if sources === s { sources = nil }
            }
            monitor.broadcast()
            return failure != nil
        }
    }

    /// The warm sources while idle (snapshots, controls), nil otherwise.
    var warm: LiveSources? { monitor.withLock { state.isOpen ? sources : nil } }

    /// For status: nil when off, else "opening", "warm" or "failed", and the failure.
    var status: (word: String?, failure: String?) {
        monitor.withLock {
            if case let .failed(message, _, _) = state.phase { return (state.statusWord, message) }
            return (state.statusWord, nil)
        }
    }

    private func run() {
        while true {
            var toClose: [LiveSources] = []
            var open: RecorderConfig?
            let stop: Bool = monitor.withLock {
                while !closing {
                    toClose = retired
                    retired = []
                    let due = state.openDue(now: SystemClock.now())
                    if due.open {
                        state.opening()
                        open = config
                        return false
                    }
                    if !toClose.isEmpty { return false }
                    _ = monitor.wait(until: due.wakeAt)
                }
                return true
            }
            toClose.forEach { $0.stop() }
            if stop { return }
            guard var c = open else { continue }
            // Outside the lock: finding which camera is at the path opens it briefly.
            c.cameraControls += controls(c)
            let now = SystemClock.now()
            do {
                guard let s = try LiveSources.open(c, logger: logger, feed: feed, preRoll: PreRoll(c.preRoll)) else {
                    throw ControlErrorText("the sources cannot be kept open (files, or unpaced)")
                }
                s.onFailure = { [weak self] msg in self?.sourceFailed(s, msg) }
                s.start()
                let keep: Bool = monitor.withLock {
                    guard !closing, state.phase == .opening else { return false }
                    state.opened(now: SystemClock.now())
                    sources = s
                    monitor.broadcast()
                    return true
                }
                if !keep { s.stop(); continue }
                let held = c.preRoll > 0 ? "; a start records from \(PreRoll.seconds(c.preRoll)) s before it, as raw frames held in memory" : ""
                logger.notice("standby: \(s.video?.description ?? "no video") and \(s.audio?.description ?? "no audio") open and streaming (nothing is recorded until 'start'\(held))")
            } catch {
                let msg = "\(error)"
                let delay: Nanos = monitor.withLock {
                    state.failed(msg, now: now)
                    monitor.broadcast()
                    return StandbyState.retryDelay(failures: state.failures)
                }
                // Once per failure streak at error level; the retries quietly.
                let failures = monitor.withLock { state.failures }
                if failures == 1 { logger.error("standby: \(msg); retrying in \(delay / 1_000_000) ms, then at most every \(StandbyState.retryMax / nanosPerSecond) s") }
                else { logger.debug("standby: still failing (\(failures)): \(msg)") }
            }
            onChange?()
        }
    }

    /// A source of the warm set failed while idle (on its capture thread): close and retry.
    private func sourceFailed(_ s: LiveSources, _ msg: String) {
        let idle: Bool = monitor.withLock {
            guard sources === s, state.isOpen else { return false }  // lent: the recording ends, then `giveBack`
            state.failed(msg, now: SystemClock.now())
            retired.append(s)
            sources = nil
            monitor.broadcast()
            return true
        }
        guard idle else { return }
        logger.error("standby: \(msg); closing the devices and retrying")
        onChange?()
    }
}

/// What `reelctl set` changed (`CameraOverrides`), shared by the recorder and the standby thread.
final class ControlOverrides: Sendable {
    private let m = Mutex(CameraOverrides())

    func withLock<R: Sendable>(_ body: (inout CameraOverrides) -> R) -> R { m.withLock { body(&$0) } }

    /// The overrides for the camera `config` names, as it is now: a different camera at its path
    /// (identified by a brief QUERYCAP) drops them, which is logged.
    func forCamera(_ config: RecorderConfig, logger: Logger) -> [CameraControlAssignment] {
        guard case let .v4l2(device, _) = config.video else { return m.withLock { $0.assignments } }
        let camera = CameraControlAccess.identity(path: device)
        let (list, dropped) = m.withLock { $0.forCamera(camera) }
        if !dropped.isEmpty {
            logger.notice("another camera is at \(device) (\(camera ?? "?")): the controls 'reelctl set' changed on the one before are dropped (\(dropped.joined(separator: ", ")))")
        }
        return list
    }
}

/// A message for a `start` refused by standby.
struct ControlErrorText: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
