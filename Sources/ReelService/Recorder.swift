import Foundation
import Logging
import ReelCapture
import ReelControl
import ReelCore
import ReelMedia
import ReelPipeline
import ReelStorage
import ReelSystem

/// The daemon's one recorder: answers control requests, owns at most one recording session.
/// Every state check happens here or in the timeline, so a command in the wrong state is refused
/// with a clear error and touches nothing already recorded.
/// @unchecked Sendable: all mutable state is guarded by `monitor`; `lifecycle` serialises
/// start/stop so two clients cannot start two sessions or finish one twice.
public final class Recorder: ControlHandler, @unchecked Sendable {
    /// The configuration the next recording uses (SIGHUP replaces it; a running one keeps its own).
    public var config: RecorderConfig { monitor.withLock { currentConfig } }
    private var currentConfig: RecorderConfig
    private let logger: Logger
    private let monitor = Monitor()
    private let lifecycle = NSLock()
    private var session: RecordingSession?
    private var lastFile: String?
    private var lastError: String?
    /// The output directory's free space as last measured (`refreshFreeSpace`), at most ~1 s old.
    private var freeSpace: (dir: String, bytes: Int64?)?
    private let startedAt = SystemClock.now()
    /// Called with a one-line state whenever it changes (systemd STATUS=).
    private let onStateChange: @Sendable (String) -> Void
    /// Set once shutdown begins (SIGTERM): from then on `start` is refused, also a start that was
    /// already waiting for `lifecycle` behind the final stop.
    private var closing = false
    /// Recordings whose end is being handled (`sessionEnded`: logging, events, starting the
    /// on_finish program); `shutdown` waits for it to reach 0, so a stop that raced SIGTERM still
    /// has its hook started and counted before reeld waits for hooks and exits.
    private var ending = 0
    /// Heartbeats of each recording's capture and pipeline threads (read by the Supervisor).
    public let health: HealthMonitor
    /// State changes, segments, finished files and errors, for `events` subscribers
    /// (`ControlServer.attach(events:)`). Publishing never blocks the recorder.
    public let events = EventBus()
    /// Errors by kind since start-up, for the metrics file.
    public let errors = ErrorCounts()
    /// Warm devices while idle (`standby = true`), lent to each recording.
    let standby: Standby
    /// The current recording's devices are the standby's (given back at its end).
    private var sessionIsWarm = false

    public init(config: RecorderConfig, logger: Logger, health: HealthMonitor = HealthMonitor(),
                onStateChange: @escaping @Sendable (String) -> Void = { _ in }) {
        self.currentConfig = config
        self.logger = logger
        self.health = health
        self.onStateChange = onStateChange
        let overrides = ControlOverrides()
        self.standbyControls = overrides
        standby = Standby(config: config, logger: logger, controls: { [logger] in overrides.forCamera($0, logger: logger) })
        refreshFreeSpace()
        standby.onChange = { [weak self] in self?.standbyChanged() }
    }
    /// What `reelctl set` changed since start-up, for the camera it was set on (buttons are not
    /// kept: a press is not replayed). Applied after the config's `[camera.controls]` at every
    /// open of that camera (here and on the standby thread); another camera drops them.
    private let standbyControls: ControlOverrides

    /// Opens the devices when standby is on (the "recorder" service's start).
    public func startStandby() { standby.start() }

    /// The last standby failure reported (so each is reported once).
    private var standbyFailure: String?

    /// Standby changed (opened, failed, retried): a new failure becomes `lastError` and an
    /// `error` event; STATUS= follows.
    private func standbyChanged() {
        let failure = standby.status.failure
        let report: String? = monitor.withLock {
            defer { standbyFailure = failure }
            guard let failure, failure != standbyFailure else { return nil }
            let msg = "standby: \(failure); reeld keeps retrying (check the device)"
            lastError = msg
            return msg
        }
        if let report { emitError(report, .source) }
        onStateChange(statusLine().line)
    }

    public func handle(_ request: Request) -> Reply {
        let received = SystemClock.now()  // the start instant with standby
        // A pause, resume or undo the pipeline has not taken when the client stops waiting (less
        // the reply's way back) is cancelled: never applied after the client was told it failed.
        let given = request.timeoutMs.map { received + Nanos($0) * 1_000_000 - Self.replyMarginNs }
        let deadline = min(given ?? .max, received + RecordingSession.requestWaitNs)
        switch request.cmd {
        case .start: return start(name: request.name, label: request.label, maxDurationNs: request.maxDurationNs, id: request.id, requestedAt: received)
        case .snapshot: return snapshot(width: request.width, id: request.id, requestedAt: received)
        case .pause: return control(.pause, id: request.id, deadline: deadline)
        case .resume: return control(.resume, label: request.label, id: request.id, deadline: deadline)
        case .undo: return undo(expecting: request.take, id: request.id, deadline: deadline)
        case .stop: return stop(id: request.id, deadline: SystemClock.now() + Self.stopWaitNs)
        case .status: return reply(id: request.id)
        case .takes: return takesReply(id: request.id)
        case .devices:
            var r = Reply(v: protocolVersion, id: request.id, ok: true)
            r.devices = listCaptureDevices()
            return r
        case .controls: return listControls(id: request.id)
        case .set:
            if let reset = request.reset { return resetControls(reset, id: request.id) }
            return setControls(request.args ?? [:], id: request.id)
        case .events:
            // The server answers `events` itself (ControlServer.attach(events:)).
            return failure(request.id, .failed("'events' reached the recorder instead of the control server (a bug in reeld; see its log)"))
        }
    }

    /// `status` on the control server's I/O thread: it reads only published snapshots under brief
    /// locks (free space comes from the once-a-second tick), so it never waits on the pipeline.
    public func quickReply(_ request: Request) -> Reply? {
        switch request.cmd {
        case .status: return reply(id: request.id)
        case .takes: return takesReply(id: request.id)
        default: return nil
        }
    }

    /// `takes`: the takes of the recording, none while idle (from snapshots, never waiting).
    private func takesReply(id: Int?) -> Reply {
        var r = Reply(v: protocolVersion, id: id, ok: true)
        r.takes = status().takes
        return r
    }

    /// Replaces the configuration for the next recording; the current one is not touched.
    public func reconfigure(_ c: RecorderConfig) {
        monitor.withLock { currentConfig = c }
        standby.reconfigure(c)
        refreshFreeSpace()
    }

    /// Called once a second by the Supervisor: finishes the recording cleanly when free space
    /// in the output directory drops below min_free_mb.
    public func tick() {
        let measured = refreshFreeSpace()
        guard let s = monitor.withLock({ session }), s.config.minFreeBytes > 0, !s.snapshot.stopping,
              measured.dir == s.config.outputDir, let free = measured.bytes, free < s.config.minFreeBytes else { return }
        let msg = "free space in \(s.config.outputDir) fell to \(Storage.megabytes(free)), below min_free_mb \(s.config.minFreeBytes / 1_000_000): finishing \(s.partPath)"
        logger.error("\(msg)")
        monitor.withLock { lastError = msg }
        emitError(msg, .lowSpace)
        NamedThread.start("reel-low-space") { [self] in _ = stop(id: nil, deadline: SystemClock.now() + Self.stopWaitNs) }
    }

    /// Free space in the output directory for status, measured here (tick, start, stop) and not
    /// on the control server's I/O thread: statvfs can block on a failing disk.
    /// Returns what it measured (the running recording's directory when there is one).
    @discardableResult
    private func refreshFreeSpace() -> (dir: String, bytes: Int64?) {
        let dir = monitor.withLock { (session?.config ?? currentConfig).outputDir }
        let free = Storage.freeBytes(dir)
        monitor.withLock { freeSpace = (dir, free) }
        return (dir, free)
    }

    /// At start-up: makes any `.part` left by a crash in the output directory playable, then
    /// hands on (on_finish, `REEL_RECOVERED=1`) each file it made and each whose hand-off a crash
    /// interrupted (`Handoff.resume`).
    public func recoverPartFiles() {
        let made = Storage.recoverPartFiles(in: config.outputDir, logger: logger)
        Handoff.resume(in: config.outputDir, recovered: made, hook: config.onFinish, timeoutNs: config.onFinishTimeoutNs, logger: logger)
    }

    /// Finishes any recording (SIGTERM/SIGINT) and waits for its file, at most until `deadline`;
    /// refuses every `start` from now on. Returns once the end of every recording has been handled
    /// (its on_finish program started), or at the deadline.
    public func shutdown(deadline: Nanos) {
        monitor.withLock { closing = true }
        if monitor.withLock({ session }) != nil {
            logger.notice("shutting down: finishing the current recording")
            _ = stop(id: nil, deadline: deadline)
        }
        monitor.withLock {
            while ending > 0, monitor.wait(until: deadline) {}
        }
        standby.shutdown()
    }

    // MARK: Commands

    private func start(name: String?, label: String?, maxDurationNs: Nanos?, id: Int?, requestedAt: Nanos) -> Reply {
        lifecycle.lock(); defer { lifecycle.unlock() }
        if monitor.withLock({ closing }) {
            return failure(id, .wrongState("cannot start: reeld is shutting down (start it again, e.g. 'systemctl start reeld')"))
        }
        if let s = monitor.withLock({ session }) {
            return failure(id, .wrongState("cannot start: already recording \(s.partPath) (run 'reelctl stop' first)"))
        }
        var config = self.config  // one configuration for the whole recording
        config.cameraControls += standbyControls.forCamera(config, logger: logger)
        // The same rules as the wire parser (callers in-process skip the wire).
        if let label, let problem = Wire.labelProblem(label) { return failure(id, .badRequest(problem)) }
        if let maxDurationNs {
            if let problem = Wire.maxDurationProblem(maxDurationNs) { return failure(id, .badRequest(problem)) }
            config.maxDuration = maxDurationNs == 0 ? nil : maxDurationNs  // this recording's cap overrides max_duration
        }
        let paths: (part: String, final: String)
        switch outputPaths(name: name, dir: config.outputDir) {
        case let .success(p): paths = p
        case let .failure(e): return failure(id, e)
        }
        if config.minFreeBytes > 0, let free = Storage.freeBytes(config.outputDir), free < config.minFreeBytes {
            return startFailed("cannot start recording: only \(Storage.megabytes(free)) free in \(config.outputDir), below min_free_mb \(config.minFreeBytes / 1_000_000) (free some space, or lower min_free_mb)", id: id)
        }
        // The devices: warm ones (standby) from the start instant on, else opened now.
        var live: LiveSources?
        let warm: Bool
        switch standby.borrow(until: SystemClock.now() + 5 * nanosPerSecond) {
        case let .success(s)?:
            live = s; warm = true
            s.arm(at: requestedAt)
        case let .failure(why)?:
            return startFailed("cannot start recording: \(why)", id: id)
        case nil: warm = false
        }
        do {
            if live == nil { live = try LiveSources.open(config, logger: logger) }
            let s: RecordingSession
            do {
                s = try RecordingSession(config: config, partPath: paths.part, finalPath: paths.final, logger: logger, health: health,
                                         label: label, sources: live)
            } catch {
                if let live { if warm { live.disarm(); standby.giveBack(live) } else { live.stop() } }
                throw error
            }
            let file = paths.part
            s.onNotice = { [events] notice in
                switch notice {
                case let .takeKept(t):
                    events.publish(ControlEvent(event: ControlEvent.Kind.takeKept, file: file, take: TakeInfo(t), at: SystemClock.now()))
                case let .capReached(cap):
                    events.publish(ControlEvent(event: ControlEvent.Kind.capReached, file: file, maxDurationNs: cap, at: SystemClock.now()))
                }
            }
            monitor.withLock { session = s; sessionIsWarm = warm; lastError = nil }
            s.start(requestedAt: warm ? requestedAt : nil)
            logger.notice("recording started: \(paths.part) (video: \(s.sourceDescriptions.video ?? "none"), audio: \(s.sourceDescriptions.audio ?? "none"))",
                          metadata: RecordingLog.fields(.started, file: paths.final, part: paths.part, segment: 0))
            refreshFreeSpace()
            stateChanged(file: paths.part)
            // When the pipeline ends on its own (source failure, disk error), the session is cleared.
            NamedThread.start("reel-session") { [self] in
                let outcome = s.finished.wait(until: nil)!
                sessionEnded(s, outcome)
            }
            var r = reply(id: id)
            r.file = paths.part
            r.startNs = requestedAt  // with standby also the start cut; without, the devices open after it
            return r
        } catch {
            unlink(paths.part)
            return startFailed("cannot start recording \(paths.part): \(error)", id: id,
                               metadata: RecordingLog.fields(.failed, file: paths.final, part: paths.part))
        }
    }

    /// A `start` that failed: logged, kept as `lastError`, published as an `error` event, answered.
    private func startFailed(_ msg: String, id: Int?, metadata: Logger.Metadata? = nil) -> Reply {
        logger.error("\(msg)", metadata: metadata)
        monitor.withLock { lastError = msg }
        emitError(msg, .start)
        return failure(id, .failed(msg))
    }

    /// What a client's deadline keeps back for the reply's way to it.
    static let replyMarginNs: Nanos = 250_000_000

    private func control(_ r: Timeline.Request, label: String? = nil, id: Int?, deadline: Nanos? = nil) -> Reply {
        guard let s = monitor.withLock({ session }) else {
            return failure(id, .wrongState("cannot \(r): not recording (state is idle; run 'reelctl start' first)"))
        }
        // A resume begins the segment after those recorded so far.
        let nextSegment = s.snapshot.segmentDurations.count
        if let label, let problem = Wire.labelProblem(label) { return failure(id, .badRequest(problem)) }
        switch s.request(r, label: r == .resume ? label : nil, deadline: deadline) {
        case .ok:
            // The segment a pause ends is the open one (the snapshot counts it), a resume begins the next.
            logger.notice("\(r == .pause ? "paused" : "resumed"): \(s.partPath)",
                          metadata: RecordingLog.fields(r == .pause ? .paused : .resumed, file: s.finalPath, part: s.partPath,
                                                        segment: r == .pause ? max(0, nextSegment - 1) : nextSegment,
                                                        durationNs: s.snapshot.recordedNs))
            if r == .resume {
                let index = nextSegment
                events.publish(ControlEvent(event: ControlEvent.Kind.segment, file: s.partPath, segment: index, at: SystemClock.now()))
            }
            stateChanged(file: s.partPath)
            return reply(id: id)
        case let .refused(msg): return failure(id, .wrongState(msg))
        case let .failed(msg): return failure(id, .failed(msg))
        }
    }

    /// `undo`: the pipeline removes the last take (cutting the file back) before answering; with
    /// `expecting`, only if the last take is that one.
    private func undo(expecting: Int?, id: Int?, deadline: Nanos? = nil) -> Reply {
        guard let s = monitor.withLock({ session }) else {
            return failure(id, .wrongState("cannot undo: not recording (state is idle; there is no take to remove)"))
        }
        if let expecting, let problem = Wire.takeProblem(expecting) { return failure(id, .badRequest(problem)) }
        switch s.undo(expecting: expecting, deadline: deadline) {
        case let .ok(number, label):
            let title = label ?? "Take \(number)"
            logger.notice("take \(number) undone (\(title)): \(s.partPath) continues after take \(number - 1)",
                          metadata: RecordingLog.fields(nil, file: s.finalPath, part: s.partPath))
            var e = ControlEvent(event: ControlEvent.Kind.takeUndone, file: s.partPath, at: SystemClock.now())
            e.take = number
            e.label = label
            e.title = title
            events.publish(e)
            stateChanged(file: s.partPath)
            return reply(id: id)
        case let .refused(msg): return failure(id, .wrongState(msg))
        case let .failed(msg): return failure(id, .failed(msg))
        }
    }

    /// How long a `stop` waits for the pipeline to finish the file before answering with an error.
    static let stopWaitNs: Nanos = 120 * nanosPerSecond

    private func stop(id: Int?, deadline: Nanos) -> Reply {
        lifecycle.lock(); defer { lifecycle.unlock() }
        guard let s = monitor.withLock({ session }) else {
            return failure(id, .wrongState("cannot stop: not recording (state is idle)"))
        }
        switch s.request(.stop, deadline: deadline) {
        case .ok: break
        case let .refused(msg): return failure(id, .wrongState(msg))
        case let .failed(msg): return failure(id, .failed(msg))
        }
        stateChanged(file: s.partPath)
        let asked = SystemClock.now()
        guard let outcome = s.finished.wait(until: deadline) else {
            return failure(id, .failed("stopping \(s.partPath) did not finish within \(max(0, deadline - asked) / nanosPerSecond) s; the daemon log has details"))
        }
        sessionEnded(s, outcome)
        switch outcome {
        case let .complete(path), let .cutShort(.file(path), .sourceFailed):
            var r = reply(id: id, finished: s)
            r.file = path
            return r
        case let .cutShort(_, .writeFailed(e)):
            // Cut short by a failed write: the file is kept, but not all that was asked for.
            return failure(id, .failed(e))
        case let .cutShort(_, .sourceFailed(e)), let .failed(e):
            return failure(id, .failed("recording \(s.partPath) ended with an error: \(e)"))
        case .nothingKept:
            // Every take was undone: stopped, and no file (none is wanted).
            return reply(id: id, finished: s)
        }
    }

    private func sessionEnded(_ s: RecordingSession, _ outcome: RecordingOutcome) {
        var close: LiveSources?
        var standbyFailed = false
        defer {
            close?.stop()  // the devices of a recording without standby, closed outside the lock
            if standbyFailed { standbyChanged() }
        }
        let changed: Bool = monitor.withLock {
            guard session === s else { return false }
            // The devices: back to standby (kept warm), before `session` is cleared so that a
            // `start` that follows finds them warm; or closed.
            if let live = s.liveSources {
                if sessionIsWarm { standbyFailed = standby.giveBack(live) } else { close = live }
            }
            session = nil
            ending += 1
            switch outcome {
            case let .complete(p): lastFile = p
            case let .cutShort(.file(p), reason):
                lastFile = p
                // The file is complete, but a source failed (camera unplugged) or the disk filled: say which and why.
                switch reason {
                case let .writeFailed(e): lastError = e
                case let .sourceFailed(e): lastError = "\(e); the recording was finished early into \(p)"
                }
            case .nothingKept: break
            case let .cutShort(_, .writeFailed(e)), let .cutShort(_, .sourceFailed(e)), let .failed(e):
                lastError = e
                // Whatever file the recording left (finished despite the error, or a .part to recover).
                lastFile = s.handedOff?.path ?? [s.finalPath, s.partPath].first { FileManager.default.fileExists(atPath: $0) } ?? lastFile
            }
            return true
        }
        guard changed else { return }
        defer { monitor.withLock { ending -= 1; monitor.broadcast() } }
        refreshFreeSpace()
        switch outcome {
        case let .complete(p), let .cutShort(.file(p), _):
            let snap = s.snapshot
            switch outcome {
            case let .cutShort(_, .writeFailed(e)):
                logger.error("recording cut short: \(e)",
                             metadata: RecordingLog.fields(.cutShort, file: p, part: s.partPath, more: ["RECORDING": "\(p)"]))
                emitError(e, .storage)
            case let .cutShort(_, .sourceFailed(e)):
                logger.error("recording \(p) finished early: \(e)", metadata: RecordingLog.fields(.cutShort, file: p, part: s.partPath))
                emitError("\(e); the recording was finished early into \(p)", .source)
            default: break
            }
            events.publish(ControlEvent(event: ControlEvent.Kind.finished, file: p, at: SystemClock.now()))
            let segs = snap.segmentDurations.count
            logger.notice("recording finished: \(p) (\(segs) segment\(segs == 1 ? "" : "s"), \(formatDuration(snap.recordedNs)), \(snap.frames) frames, \(snap.droppedFrames) dropped)",
                          metadata: RecordingLog.fields(.finished, file: p, part: s.partPath, durationNs: snap.recordedNs,
                                                        more: ["REEL_SEGMENTS": "\(segs)", "REEL_FRAMES": "\(snap.frames)",
                                                               "REEL_DROPPED_FRAMES": "\(snap.droppedFrames)"]))
            Handoff.handOn(s.handedOff ?? FinishedFile(path: p, by: .stop), recovered: false, hook: s.config.onFinish,
                           timeoutNs: s.config.onFinishTimeoutNs, logger: logger)
        case let .cutShort(_, .writeFailed(e)):
            logger.error("recording cut short: \(e)", metadata: RecordingLog.fields(.failed, file: s.finalPath, part: s.partPath))
            emitError(e, .storage)
        case .nothingKept:
            logger.notice("recording stopped with every take undone: no file (\(s.finalPath) was not written)")
            events.publish(ControlEvent(event: ControlEvent.Kind.finished, file: nil, at: SystemClock.now()))
        case let .cutShort(_, .sourceFailed(e)), let .failed(e):
            logger.error("recording ended with an error: \(e)", metadata: RecordingLog.fields(.failed, file: s.finalPath, part: s.partPath))
            emitError("recording \(s.partPath) ended with an error: \(e)", .recording)
            // Finished into a file all the same (an encoder failed after the last fragment): handed on too.
            if let f = s.handedOff {
                Handoff.handOn(f, recovered: false, hook: s.config.onFinish, timeoutNs: s.config.onFinishTimeoutNs, logger: logger)
            }
        }
        stateChanged(file: nil)
    }

    // MARK: Camera controls

    /// The camera `controls`/`set` act on: the recording's when recording, else the configured
    /// one; or why there is none.
    private func cameraPath(_ config: RecorderConfig) -> Result<String, ControlError> {
        let need = "controls need a V4L2 camera (video = \"/dev/videoN\"; see 'reelctl devices')"
        switch config.video {
        case let .v4l2(device, _): return .success(device)
        case .test: return .failure(.failed("the test source has no controls; \(need)"))
        case let .y4m(path, _): return .failure(.failed("the video file y4m:\(path) has no controls; \(need)"))
        case .none: return .failure(.failed("there is no video source (video = \"none\"); \(need)"))
        }
    }

    /// `controls`: on the recording's open fd while recording, else by opening the camera briefly
    /// (after applying the config and earlier `set`s, as a recording would).
    private func listControls(id: Int?) -> Reply {
        let (s, config) = monitor.withLock { (session, currentConfig) }
        if let list = (s?.camera ?? standby.warm?.camera)?.controls() { return controlsReply(id, list) }
        let overrides = standbyControls.forCamera(s?.config ?? config, logger: logger)
        let path: String
        switch cameraPath(s?.config ?? config) {
        case let .success(p): path = p
        case let .failure(e): return failure(id, e)
        }
        do {
            let (list, warning) = try CameraControlAccess.list(path: path, base: config.cameraControls + overrides)
            if let warning { logger.warning("camera controls from the config were not all applied (the next 'start' fails with this): \(warning)") }
            return controlsReply(id, list)
        } catch {
            return failure(id, .failed("cannot list the controls of camera \(path): \(error)"))
        }
    }

    /// `set`: checks every value against the camera's own description, then sets them all in one
    /// call, on the open fd while recording (the capture thread never waits), else by opening the
    /// camera briefly. What was set is kept and applied again at every later open.
    private func setControls(_ args: [String: CameraControlInput], id: Int?) -> Reply {
        let assignments = args.sorted { $0.key < $1.key }.map { CameraControlAssignment(name: $0.key, input: $0.value, origin: "") }
        let (s, config) = monitor.withLock { (session, currentConfig) }
        let overrides = standbyControls.forCamera(s?.config ?? config, logger: logger)
        let set: [CameraControlInfo]
        do {
            if let live = try (s?.camera ?? standby.warm?.camera)?.setControls(assignments) {
                set = live
            } else {
                let path: String
                switch cameraPath(s?.config ?? config) {
                case let .success(p): path = p
                case let .failure(e): return failure(id, e)
                }
                set = try CameraControlAccess.set(path: path, base: config.cameraControls + overrides, assignments)
            }
        } catch {
            logger.warning("reelctl set: \(error)")
            return failure(id, .failed("\(error)"))
        }
        let kept = assignments.filter { a in set.contains { $0.name == a.name && $0.type != .button } }
        if case let .v4l2(device, _) = (s?.config ?? config).video {
            let camera = CameraControlAccess.identity(path: device) ?? device
            let dropped = standbyControls.withLock { $0.record(kept, on: camera) }
            if !dropped.isEmpty { logger.notice("camera controls set on \(camera): those set on the camera before are dropped (\(dropped.joined(separator: ", ")))") }
        }
        logger.notice("camera controls set: \(set.map { "\($0.name)=\($0.value.map($0.show) ?? "?")" }.joined(separator: " "))")
        return controlsReply(id, set)
    }

    /// `set --reset`: clears what earlier `set`s changed (all, or the named controls), so the
    /// next opens apply only the config's `[camera.controls]`; the camera, if it can be reached,
    /// goes back at once to those values, else to its defaults. Names not changed by `set` are
    /// refused, naming them, when none of the names was.
    private func resetControls(_ reset: ControlReset, id: Int?) -> Reply {
        var names: [String]?
        if case let .only(n) = reset { names = n }
        let (removed, notSet) = standbyControls.withLock { $0.reset(names) }
        if removed.isEmpty, !notSet.isEmpty {
            return failure(id, .failed("nothing to reset: 'reelctl set' did not change \(notSet.joined(separator: ", ")) (see 'reelctl controls')"))
        }
        if !notSet.isEmpty { logger.info("reelctl set --reset: \(notSet.joined(separator: ", ")) had not been changed by 'reelctl set'") }
        guard !removed.isEmpty else { return controlsReply(id, []) }
        logger.notice("camera controls reset (no longer applied at each open): \(removed.joined(separator: " "))")
        let (s, config) = monitor.withLock { (session, currentConfig) }
        let base = (s?.config ?? config).cameraControls.filter { $0.origin != "" }  // the config's own, not earlier sets
        let live = s?.camera ?? standby.warm?.camera
        let path: String
        switch cameraPath(s?.config ?? config) {
        case let .success(p): path = p
        case .failure: return controlsReply(id, [])  // no camera to put back: the overrides are cleared
        }
        let remaining = standbyControls.withLock { $0.assignments }
        do {
            let info = try live?.controls() ?? CameraControlAccess.list(path: path, base: base + remaining).controls
            // Back to what an open sets: the config's value, else the camera's default.
            let restore = removed.compactMap { name -> CameraControlAssignment? in
                if let fromConfig = base.last(where: { $0.name == name }) { return fromConfig }
                guard let c = info.first(where: { $0.name == name }), c.type != .button, c.type != .string else { return nil }
                return CameraControlAssignment(name: name, input: .int(c.defaultValue), origin: "the camera's default")
            }
            guard !restore.isEmpty else { return controlsReply(id, []) }
            let set = try live?.setControls(restore) ?? CameraControlAccess.set(path: path, base: base + remaining, restore)
            return controlsReply(id, set)
        } catch {
            let msg = "the controls set earlier are cleared (not applied at the next open), but camera \(path) could not be put back to its values now: \(error)"
            logger.warning("reelctl set --reset: \(msg)")
            return failure(id, .failed(msg))
        }
    }

    // MARK: Snapshots

    /// How long a snapshot waits for the next frame of open devices, and for a brief open.
    static let snapshotWaitNs: Nanos = 2 * nanosPerSecond
    static let snapshotOpenWaitNs: Nanos = 5 * nanosPerSecond

    /// `snapshot`: a JPEG of the newest frame the camera delivered: from the recording's devices,
    /// the warm ones (standby), or a brief open of the configured camera. The image goes back in
    /// the reply, so any client allowed on the socket gets it, wherever reeld may write.
    private func snapshot(width: Int?, id: Int?, requestedAt: Nanos) -> Reply {
        var open = monitor.withLock { session?.liveSources } ?? standby.warm
        var brief: LiveSources?
        if open == nil {
            // A brief open, serialised with start/stop so that it never races a recording's open.
            lifecycle.lock()
            defer { lifecycle.unlock() }
            open = monitor.withLock { session?.liveSources } ?? standby.warm
            if open == nil {
                var config = self.config
                config.cameraControls += standbyControls.forCamera(config, logger: logger)
                let camera = snapshotSource(config)
                guard camera.ok else { return failure(id, .failed(camera.why)) }
                do {
                    guard let s = try LiveSources.open(config, logger: logger, videoOnly: true) else {
                        return failure(id, .failed("cannot take a snapshot: \(config.videoDescription) is not a live source (snapshots need a camera or the test source)"))
                    }
                    brief = s
                    s.start()
                } catch {
                    return failure(id, .failed("cannot take a snapshot: \(error)"))
                }
                return snapshotReply(from: brief!, width: width, id: id, requestedAt: requestedAt, wait: Self.snapshotOpenWaitNs, closing: true)
            }
        }
        return snapshotReply(from: open!, width: width, id: id, requestedAt: requestedAt, wait: Self.snapshotWaitNs, closing: false)
    }

    /// Whether the configured video source can give a snapshot, or why not.
    private func snapshotSource(_ config: RecorderConfig) -> (ok: Bool, why: String) {
        switch config.video {
        case .v4l2, .test: return (true, "")
        case .none: return (false, "cannot take a snapshot: there is no video source (video = \"none\"; set a camera, see 'reelctl devices')")
        case let .y4m(path, _): return (false, "cannot take a snapshot: the video source is the file y4m:\(path) (snapshots need a camera or the test source)")
        }
    }

    private func snapshotReply(from live: LiveSources, width: Int?, id: Int?, requestedAt: Nanos, wait: Nanos, closing: Bool) -> Reply {
        defer { if closing { live.stop() } }
        guard let format = live.videoFormat else {
            return failure(id, .failed("cannot take a snapshot: there is no video source (video = \"none\"; set a camera, see 'reelctl devices')"))
        }
        if let width, SnapshotEncoder.scaledSize(width: format.width, height: format.height, target: width) == nil {
            return failure(id, .badRequest("bad \"width\": \(width) is out of range \(SnapshotEncoder.minWidth) to \(format.width) (the camera's width; a snapshot is never enlarged)"))
        }
        guard let frame = live.nextFrame(until: SystemClock.now() + wait) else {
            let why = live.failure.map { "the source failed: \($0)" } ?? "no frame within \(wait / nanosPerSecond) s"
            return failure(id, .failed("cannot take a snapshot from \(live.video?.description ?? "the camera"): \(why) (see 'reelctl status' and reeld's log)"))
        }
        do {
            let jpeg = try frame.bytes.withUnsafeBytes {
                try SnapshotEncoder.encode($0, width: format.width, height: format.height, format: format.pixelFormat, targetWidth: width)
            }
            guard jpeg.jpeg.count <= SnapshotInfo.maxBytes else {
                return failure(id, .failed("the snapshot is \(jpeg.jpeg.count) bytes, more than the \(SnapshotInfo.maxBytes) a reply carries (ask for a smaller --width)"))
            }
            var r = Reply(v: protocolVersion, id: id, ok: true)
            r.snapshot = SnapshotInfo(width: jpeg.width, height: jpeg.height, capturedNs: frame.time, jpeg: jpeg.jpeg)
            logger.info("snapshot: \(jpeg.width)x\(jpeg.height), \(jpeg.jpeg.count) bytes, captured \((frame.time - requestedAt) / 1_000_000) ms after the request, sent \((SystemClock.now() - requestedAt) / 1_000_000) ms after it")
            return r
        } catch {
            return failure(id, .failed("cannot take a snapshot: \(error)"))
        }
    }

    private func controlsReply(_ id: Int?, _ list: [CameraControlInfo]) -> Reply {
        var r = Reply(v: protocolVersion, id: id, ok: true)
        r.controls = list
        return r
    }

    // MARK: Helpers

    private func outputPaths(name: String?, dir: String) -> Result<(part: String, final: String), ControlError> {
        var isDir: ObjCBool = false
        if !FileManager.default.fileExists(atPath: dir, isDirectory: &isDir) {
            do { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
            catch { return .failure(.failed("cannot create output directory \(dir): \(error.localizedDescription) (check --output-dir and permissions)")) }
        } else if !isDir.boolValue {
            return .failure(.failed("output directory \(dir) is not a directory (check --output-dir)"))
        }
        func exists(_ base: String) -> Bool {
            FileManager.default.fileExists(atPath: "\(dir)/\(base).mp4") || FileManager.default.fileExists(atPath: "\(dir)/\(base).mp4.part")
        }
        var base: String
        if let name {
            // One rule for names, shared with the wire parser (callers in-process skip the wire).
            if let problem = Wire.nameProblem(name) { return .failure(.badRequest(problem)) }
            base = name.hasSuffix(".mp4") ? String(name.dropLast(4)) : name
            if exists(base) { return .failure(.failed("\(dir)/\(base).mp4 already exists: choose another --name (Reel never overwrites a recording)")) }
        } else {
            var t = time(nil)
            var tmv = tm()
            localtime_r(&t, &tmv)
            var buf = [CChar](repeating: 0, count: 32)
            strftime(&buf, buf.count, "reel-%Y%m%d-%H%M%S", &tmv)
            let stem = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            base = stem
            var k = 2
            while exists(base) { base = "\(stem)-\(k)"; k += 1 }
        }
        return .success(("\(dir)/\(base).mp4.part", "\(dir)/\(base).mp4"))
    }

    private func status(finished: RecordingSession? = nil) -> StatusInfo {
        let (s, lastFile, lastError) = monitor.withLock { (session, self.lastFile, self.lastError) }
        let current = s ?? finished
        let snap = current?.snapshot ?? SessionSnapshot()
        let state: RecorderState
        if let s {
            let sn = s.snapshot
            state = sn.stopping ? .stopping : (sn.phase == .paused ? .paused : .recording)
        } else { state = .idle }
        let desc: (video: String?, audio: String?) = current?.sourceDescriptions ?? (nil, nil)
        var info = StatusInfo(
            state: state, file: s?.partPath,
            segments: snap.segmentDurations.enumerated().map { SegmentInfo(index: $0.offset, durationNs: $0.element) },
            recordedNs: snap.recordedNs, frames: snap.frames, droppedFrames: snap.droppedFrames,
            audioSamples: snap.audioSamples, lastFile: lastFile, lastError: lastError,
            video: desc.video ?? config.videoDescription, audio: desc.audio ?? config.audioDescription,
            uptimeNs: SystemClock.now() - startedAt, audioFilledSamples: snap.audioFilledSamples)
        info.takes = snap.takes.map(TakeInfo.init)
        info.standby = standby.status.word
        info.remainingNs = snap.remaining
        info.originNs = snap.origin
        if current != nil {
            info.audioPeakDbfs = snap.audioPeak.map(Self.dbfs)
            info.bytesWritten = snap.bytesWritten
        }
        let dir = (current?.config ?? config).outputDir
        info.freeBytes = monitor.withLock { freeSpace?.dir == dir ? freeSpace?.bytes : nil }
        return info
    }

    /// A sample peak (0...32768) in dBFS with one decimal; nil for digital silence.
    static func dbfs(_ peak: Int32) -> Double? {
        guard peak > 0 else { return nil }
        return (20 * log10(Double(peak) / 32768) * 10).rounded() / 10
    }

    private func reply(id: Int?, finished: RecordingSession? = nil) -> Reply {
        Reply(v: protocolVersion, id: id, ok: true, file: nil, status: status(finished: finished), error: nil)
    }
    private func failure(_ id: Int?, _ e: ControlError) -> Reply {
        Reply(v: protocolVersion, id: id, ok: false, file: nil, status: nil, error: e)
    }

    /// Tells systemd (STATUS=) and event subscribers the new state.
    private func stateChanged(file: String?) {
        let st = status()
        events.publish(ControlEvent(event: ControlEvent.Kind.state, state: st.state, file: file ?? st.file, at: SystemClock.now()))
        onStateChange(statusLine().line)
    }

    private func emitError(_ message: String, _ kind: ErrorKind) {
        errors.count(kind)
        events.publish(ControlEvent(event: ControlEvent.Kind.error, message: message, at: SystemClock.now()))
    }

    /// The status as `status` answers it (from published snapshots; never waits on the pipeline).
    public func statusInfo() -> StatusInfo { status() }

    /// The one-line state for systemd's STATUS=, e.g. "recording 00:01:23, 3 segments", and
    /// whether a recording is in progress (the Supervisor refreshes the line every second then).
    public func statusLine() -> (line: String, active: Bool) {
        let st = status()
        switch st.state {
        case .idle: return (st.lastError.map { "idle; last error: \($0)" } ?? "idle", false)
        default:
            let secs = formatDuration(st.recordedNs).prefix(8)  // whole seconds: hh:mm:ss
            return ("\(st.state.rawValue) \(secs), \(st.segments.count) segment\(st.segments.count == 1 ? "" : "s")", true)
        }
    }
}

