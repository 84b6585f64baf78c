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
/// Every state check happens in `RecorderLifecycle` (start, stop, each ending and what it reports,
/// shutdown) or in the timeline, so a command in the wrong state is refused with a clear error
/// and touches nothing already recorded. The commands that make and end a recording are in
/// Recorder+Recording.swift, camera controls and snapshots in Recorder+Camera.swift.
/// @unchecked Sendable: all mutable state is guarded by `monitor`; `lifecycle` serialises
/// start/stop so two clients cannot start two sessions or finish one twice.
public final class Recorder: ControlHandler, @unchecked Sendable {
    /// The configuration the next recording uses (SIGHUP replaces it; a running one keeps its own).
    public var config: RecorderConfig { monitor.withLock { currentConfig } }
    private(set) var currentConfig: RecorderConfig
    let logger: Logger
    let monitor = Monitor()
    let lifecycle = NSLock()
    /// The recording's session; set and cleared with `machine`'s recording.
    var session: RecordingSession?
    /// Every lifecycle decision, and `status`'s lastFile and lastError (changed by `changeLifecycle`).
    private(set) var machine = RecorderLifecycle()
    /// The output directory's free space as last measured (`refreshFreeSpace`), at most ~1 s old.
    private var freeSpace: (dir: String, bytes: Int64?)?
    private let startedAt = SystemClock.now()
    /// Called with a one-line state whenever it changes (systemd STATUS=).
    private let onStateChange: @Sendable (String) -> Void
    /// Heartbeats of each recording's capture and pipeline threads (read by the Supervisor).
    public let health: HealthMonitor
    /// State changes, segments, finished files and errors, for `events` subscribers
    /// (`ControlServer.attach(events:)`). Publishing never blocks the recorder.
    public let events = EventBus()
    /// Errors by kind since start-up, for the metrics file.
    public let errors = ErrorCounts()
    /// keep_free_mb's deletions (on the Supervisor's tick).
    let roomKeeper = RoomKeeper()
    /// Warm devices while idle (`standby = true`), lent to each recording.
    let standby: Standby
    /// `preview` and `levels` subscribers (`ControlServer.attach(live:)`); the open sources meter
    /// levels into it and the preview thread encodes frames for it.
    public let liveFeed: LiveFeed
    private var previewStreamer: PreviewStreamer!

    public init(config: RecorderConfig, logger: Logger, health: HealthMonitor = HealthMonitor(),
                onStateChange: @escaping @Sendable (String) -> Void = { _ in }) {
        self.currentConfig = config
        self.logger = logger
        self.health = health
        self.onStateChange = onStateChange
        let overrides = ControlOverrides()
        self.standbyControls = overrides
        let feed = LiveFeed()
        liveFeed = feed
        standby = Standby(config: config, logger: logger, feed: feed, controls: { [logger] in overrides.forCamera($0, logger: logger) })
        refreshFreeSpace()
        standby.onChange = { [weak self] in self?.standbyChanged() }
        liveFeed.setLimits(PreviewLimits(maxWidth: config.previewMaxWidth, maxFps: config.previewMaxFps))
        liveFeed.setCameraSource { [weak self] in
            (self?.openSources().live?.videoFormat).map { PreviewCamera(width: $0.width, height: $0.height, fps: $0.fps) }
        }
        previewStreamer = PreviewStreamer(feed: liveFeed, logger: logger) { [weak self] in
            self?.openSources() ?? (nil, "reeld is stopping")
        }
    }

    /// The sources open now (the recording's, else the warm ones), or why none are, for previews.
    func openSources() -> (live: LiveSources?, why: String) {
        let (s, config) = monitor.withLock { (session, currentConfig) }
        if let s {
            if let live = s.liveSources { return (live, "") }
            return (nil, "the recording's sources are not live (a file, or unpaced): nothing to preview")
        }
        if let warm = standby.warm { return (warm, "") }
        if case .none = config.video { return (nil, "there is no video source (video = \"none\")") }
        let st = standby.status
        switch st.word {
        case nil: return (nil, "no camera is open: reeld is idle and standby is off (the preview shows the camera while recording or paused, or while idle with standby = true)")
        case "failed"?: return (nil, "standby: the devices failed: \(st.failure ?? "unknown"); retrying")
        default: return (nil, "standby: the devices are being opened")
        }
    }
    /// What `reelctl set` changed since start-up, for the camera it was set on (buttons are not
    /// kept: a press is not replayed). Applied after the config's `[camera.controls]` at every
    /// open of that camera (here and on the standby thread); another camera drops them.
    let standbyControls: ControlOverrides

    /// Opens the devices when standby is on (the "recorder" service's start).
    public func startStandby() {
        standby.start()
        previewStreamer.start()
    }

    /// Standby changed (opened, failed, retried): a new failure becomes `lastError` and an
    /// `error` event; STATUS= follows.
    func standbyChanged() {
        let failure = standby.status.failure
        let steps = changeLifecycle { $0.standby(failure: failure) }
        perform(steps, config: config)
        onStateChange(statusLine().line)
    }

    public func handle(_ request: Request) -> Reply {
        let received = SystemClock.now()  // the start instant with standby
        // A pause, resume or undo the pipeline has not taken when the client stops waiting (less
        // the reply's way back) is cancelled: never applied after the client was told it failed.
        let given = request.timeoutMs.map { received + Nanos($0) * 1_000_000 - Self.replyMarginNs }
        let deadline = min(given ?? .max, received + RecordingSession.requestWaitNs)
        switch request.cmd {
        case .start: return start(name: request.name, label: request.label, maxDurationNs: request.maxDurationNs, preRollNs: request.preRollNs,
                                  askedAt: request.atNs, id: request.id, requestedAt: received)
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
        case .events, .preview, .levels:
            // The server answers these itself (ControlServer.attach(events:), attach(live:)).
            return failure(request.id, .failed("'\(request.cmd.rawValue)' reached the recorder instead of the control server (a bug in reeld; see its log)"))
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
        liveFeed.setLimits(PreviewLimits(maxWidth: c.previewMaxWidth, maxFps: c.previewMaxFps))
        standby.reconfigure(c)
        refreshFreeSpace()
    }

    /// Called once a second by the Supervisor: with keep_free_mb, deletes uploaded recordings
    /// while free space is below it (`RoomKeeper`); then finishes the recording cleanly when free
    /// space in the output directory drops below min_free_mb.
    public func tick() {
        let (c, inProgress) = monitor.withLock { (session?.config ?? currentConfig, session?.finalPath) }
        if c.keepFreeBytes > 0, let box = c.outboxDir {
            roomKeeper.keep(dir: c.outputDir, outbox: Outbox(path: box), keepFreeBytes: c.keepFreeBytes, inProgress: inProgress, logger: logger)
        }
        let measured = refreshFreeSpace()
        let current: (session: RecordingSession, id: Int)? = monitor.withLock {
            guard let s = session, let r = machine.recording else { return nil }
            return (s, r.id)
        }
        guard let (s, id) = current else { return }
        let stopping = s.snapshot.stopping
        let steps = changeLifecycle { $0.freeSpace(measured.bytes, in: measured.dir, stopping: stopping, of: id) }
        perform(steps, config: s.config)
    }

    /// Free space in the output directory for status, measured here (tick, start, stop) and not
    /// on the control server's I/O thread: statvfs can block on a failing disk.
    /// Returns what it measured (the running recording's directory when there is one).
    @discardableResult
    func refreshFreeSpace() -> (dir: String, bytes: Int64?) {
        let dir = monitor.withLock { (session?.config ?? currentConfig).outputDir }
        let free = Storage.freeBytes(dir)
        monitor.withLock { freeSpace = (dir, free) }
        return (dir, free)
    }

    /// At start-up: makes any `.part` left by a crash in the output directory playable, then
    /// hands on (the outbox link, on_finish with `REEL_RECOVERED=1`) each file it made and each
    /// whose hand-off a crash interrupted (`Handoff.resume`).
    public func recoverPartFiles() {
        let made = Storage.recoverPartFiles(in: config.outputDir, logger: logger)
        let c = config
        Handoff.resume(in: c.outputDir, recovered: made, hook: c.onFinish, timeoutNs: c.onFinishTimeoutNs,
                       outbox: c.outboxDir.map(Outbox.init(path:)), logger: logger, linkFailed: { [self] in emitError($0, .outbox) })
    }

    /// Finishes any recording (SIGTERM/SIGINT), also the one a start under way makes, and waits
    /// for its file, at most until `deadline`; refuses every `start` from now on. Returns once the
    /// end of every recording has been handled (its on_finish program started), or at the deadline.
    public func shutdown(deadline: Nanos) {
        if changeLifecycle({ $0.shutdown() }) {
            logger.notice("shutting down: finishing the current recording")
            _ = stop(id: nil, deadline: deadline)
        }
        waitForLifecycle(until: deadline) { $0.isQuiet }
        previewStreamer.stop()
        standby.shutdown()
    }

    /// Changes the lifecycle (under `monitor`) and wakes those waiting for it (`waitForLifecycle`).
    func changeLifecycle<R>(_ body: (inout RecorderLifecycle) -> R) -> R {
        monitor.withLock {
            defer { monitor.broadcast() }
            return body(&machine)
        }
    }

    /// Waits until `done` holds of the lifecycle, at most until `deadline`; returns whether it holds.
    @discardableResult
    func waitForLifecycle(until deadline: Nanos?, _ done: (RecorderLifecycle) -> Bool) -> Bool {
        monitor.withLock {
            while !done(machine) { if !monitor.wait(until: deadline) { return done(machine) } }
            return true
        }
    }

    // MARK: Status and replies

    private func status(finished: RecordingSession? = nil) -> StatusInfo {
        let (s, lastFile, lastError) = monitor.withLock { (session, machine.lastFile, machine.lastError) }
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
        if config.preRoll > 0 { info.preRollNs = s == nil ? standby.warm?.preRollAvailable(now: SystemClock.now()) ?? 0 : 0 }
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

    func reply(id: Int?, finished: RecordingSession? = nil) -> Reply {
        Reply(v: protocolVersion, id: id, ok: true, file: nil, status: status(finished: finished), error: nil)
    }
    func failure(_ id: Int?, _ e: ControlError) -> Reply {
        Reply(v: protocolVersion, id: id, ok: false, file: nil, status: nil, error: e)
    }

    /// Tells systemd (STATUS=) and event subscribers the new state.
    func stateChanged(file: String?) {
        let st = status()
        events.publish(ControlEvent(event: ControlEvent.Kind.state, state: st.state, file: file ?? st.file, at: SystemClock.now()))
        onStateChange(statusLine().line)
    }

    func emitError(_ message: String, _ kind: ErrorKind) {
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

