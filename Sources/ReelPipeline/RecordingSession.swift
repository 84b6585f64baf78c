import Foundation
import Logging
import ReelCapture
import ReelCore
import ReelMedia
import ReelStorage
import ReelSystem
import Synchronization

/// Which sources and encoder settings a recording uses.
public struct RecorderConfig: Sendable {
    public enum Video: Sendable {
        case none, test(VideoFormat)
        /// A YUV4MPEG2 file (`--video y4m:PATH`).
        case y4m(path: String, VideoFormat)
        /// A V4L2 camera (`/dev/videoN`) at exactly this format, size and rate.
        case v4l2(device: String, CameraRequest)
    }
    public enum Audio: Sendable {
        case none, test(AudioFormat, skewPpm: Int64)
        /// A 16-bit PCM WAV file (`--audio wav:PATH`).
        case wav(path: String, AudioFormat)
        /// An ALSA capture device (`hw:1,0`, `plughw:1,0`, `default`, ...).
        case alsa(device: String, AudioFormat)
    }
    public var outputDir: String
    public var video: Video
    public var audio: Audio
    public var paced: Bool
    public var h264: H264Settings
    public var aac: AACSettings
    /// Resample the audio so its sample clock follows CLOCK_MONOTONIC (see `DriftLock`).
    public var driftLock: Bool
    /// Refuse to start, and finish a recording, when the output file system has less free space (0: no check).
    public var minFreeBytes: Int64 = 0
    /// When the file is synced to disk (see `FsyncPolicy`).
    public var fsync: FsyncPolicy = .fragment
    /// Program and arguments run after each completed recording, with the file's path appended (empty: none).
    public var onFinish: [String] = []
    public var onFinishTimeoutNs: Nanos = 120 * nanosPerSecond
    /// The length cap: kept output (ns) at which a recording stops by itself (nil: none).
    public var maxDuration: Nanos?
    /// Camera controls set at every open of a V4L2 camera, in order: `[camera.controls]` from
    /// the config file, then what `reelctl set` changed since reeld started (later wins).
    public var cameraControls: [CameraControlAssignment] = []
    /// Keep the live sources open and streaming while idle (`standby`; see `StandbyState`).
    public var standby = false
    public init(outputDir: String, video: Video, audio: Audio, paced: Bool, h264: H264Settings, aac: AACSettings,
                driftLock: Bool = true) {
        self.outputDir = outputDir; self.video = video; self.audio = audio; self.paced = paced; self.h264 = h264; self.aac = aac
        self.driftLock = driftLock
    }
    /// What the pipeline receives from the video source (a camera's MJPEG arrives as I420).
    public var videoFormat: VideoFormat? {
        switch video {
        case .none: return nil
        case let .test(f), let .y4m(_, f): return f
        case let .v4l2(_, r): return VideoFormat(width: r.width, height: r.height, fps: r.fps, pixelFormat: r.pixelFormat.delivered)
        }
    }
    public var audioFormat: AudioFormat? {
        switch audio {
        case .none: return nil
        case let .test(f, _), let .wav(_, f), let .alsa(_, f): return f
        }
    }
    /// The video source as status shows it while idle, e.g. "v4l2 /dev/video0 640x360 30 yuyv".
    public var videoDescription: String {
        switch video {
        case .none: return "none"
        case let .test(f): return "test \(f.width)x\(f.height) \(f.fps) \(f.pixelFormat.rawValue)"
        case let .y4m(path, f): return "y4m:\(path) \(f.width)x\(f.height) \(f.fps) \(f.pixelFormat.rawValue)"
        case let .v4l2(d, r): return "v4l2 \(d) \(r.width)x\(r.height) \(r.fps) \(r.pixelFormat.rawValue)"
        }
    }
    public var audioDescription: String {
        switch audio {
        case .none: return "none"
        case let .test(f, _): return "test \(f.sampleRate) Hz \(f.channels) ch"
        case let .wav(path, f): return "wav:\(path) \(f.sampleRate) Hz \(f.channels) ch"
        case let .alsa(d, f): return "alsa \(d) \(f.sampleRate) Hz \(f.channels) ch"
        }
    }

    /// Opens the capture sources this configuration names (not started); `videoOnly`: no audio.
    package func openSources(logger: Logger, videoOnly: Bool = false) throws -> (video: (any CaptureSource)?, audio: (any CaptureSource)?) {
        let vs: (any CaptureSource)?
        switch video {
        case .none: vs = nil
        case let .test(f): vs = TestVideoSource(format: f, paced: paced)
        case let .y4m(path, _): vs = try FileVideoSource(path: path, paced: paced)
        case let .v4l2(device, request): vs = try V4L2VideoSource(path: device, request: request, logger: logger, controls: cameraControls)
        }
        guard !videoOnly else { return (vs, nil) }
        let aso: (any CaptureSource)?
        switch audio {
        case .none: aso = nil
        case let .test(f, skew): aso = TestAudioSource(format: f, skewPpm: skew, paced: paced)
        case let .wav(path, _): aso = try FileAudioSource(path: path, paced: paced)
        case let .alsa(device, f): aso = try ALSAAudioSource(device: device, format: f, logger: logger)
        }
        return (vs, aso)
    }
}

/// What the control plane can see of a running recording; published by the pipeline thread.
public struct SessionSnapshot: Sendable {
    public var phase: Timeline.Phase = .recording
    public var stopping = false
    public var segmentDurations: [Nanos] = []
    public var recordedNs: Nanos = 0
    public var frames: Int64 = 0
    public var droppedFrames: Int64 = 0
    public var audioSamples: Int64 = 0
    public var audioFilledSamples: Int64 = 0
    public var timestampFixes: Int = 0
    /// Per channel: the largest |sample| of the audio encoded (kept) over the last ~1 s, 0...32768.
    public var audioPeak: [Int32] = []
    /// Bytes of the MP4 written so far.
    public var bytesWritten: Int64 = 0
    /// The kept takes so far (the open one with no duration).
    public var takes: [Timeline.Take] = []
    /// Output time left before the length cap (nil: no cap); true once the cap stopped the recording.
    public var remaining: Nanos?
    public var capReached = false
    /// The capture instant (CLOCK_MONOTONIC ns) of the file's time 0 (`SessionMachine.Progress.origin`).
    public var origin: Nanos?

    public init() {}
}

/// One recording: sources -> timeline -> encoders -> MP4, from `start` to the renamed file.
///
/// Threads: each source has its capture thread; the decisions (timeline, cuts, silence), pixel
/// conversion, video encoding and muxing run on this session's pipeline thread, fed by one
/// bounded queue; the kept audio is AAC-encoded and written on an `AudioEncoderThread`. Capture
/// threads never wait on either when live: a full pool or queue drops the sample and counts it.
/// @unchecked Sendable: the pipeline's fields are touched only by the pipeline thread once
/// `start()` has launched it, except what `encodeAAC` uses (`aac`, `aacOffset`, `aacKeepFrom`,
/// the `mux` reference; `mux` itself is locked), which the AAC thread reads and the pipeline
/// changes only with that thread quiesced or closed; the rest are immutable or guarded
/// (`queue`, `monitor`, promises).
package final class RecordingSession: MediaSink, @unchecked Sendable {
    package enum Outcome: Sendable { case ok(Timeline.Phase), refused(String), failed(String) }
    /// An undo's answer: the take removed (number, label), or why not.
    package enum UndoOutcome: Sendable { case ok(number: Int, label: String?), refused(String), failed(String) }
    /// What the pipeline tells the recorder as it happens (on the pipeline thread; must not block).
    package enum Notice: Sendable {
        /// A take closed and is kept (pause, stop, the cap).
        case takeKept(Timeline.Take)
        /// The length cap (ns) stopped the recording.
        case capReached(Nanos)
    }
    /// Set before `start()`; called on the pipeline thread.
    package var onNotice: (@Sendable (Notice) -> Void)?
    package enum Event: Sendable {
        case media(MediaEvent)
        /// `reply`: taken before it is applied; one given up on by its requester is dropped.
        case request(Timeline.Request, at: Nanos?, label: String?, reply: DeadlineReply<Outcome>)
        case undo(at: Nanos?, expecting: Int?, reply: DeadlineReply<UndoOutcome>)
    }

    package let partPath: String
    package let finalPath: String
    /// The finished file as `Handoff.place` left it (its name, how it was finished), for
    /// `Handoff.handOn`; nil when no file was finished. Set on the pipeline thread before
    /// `finished` is fulfilled, read after.
    package var handedOff: FinishedFile? { monitor.withLock { placed } }
    private var placed: FinishedFile?  // guarded by `monitor`
    package let config: RecorderConfig
    private let logger: Logger
    private let queue = BlockingQueue<Event>(capacity: 1024)
    /// Fulfilled with how the recording ended when the pipeline thread ends.
    package let finished = Promise<RecordingOutcome>()
    private let monitor = Monitor()
    private var snapshotValue = SessionSnapshot()
    /// Unpaced interleaving: each stream's latest media time (video, audio), guarded by `turn`.
    private let turn = Monitor()
    private var position: [Nanos?] = [nil, nil]
    static let unpacedSlack: Nanos = 500_000_000
    /// Video not arriving for this long counts as stalled (see `Timeline.videoStalled`).
    static let videoStallTimeout: Nanos = 1_000_000_000
    /// When the last video frame was handed over by the capture thread (CLOCK_MONOTONIC ns).
    private let lastVideoArrival = Atomic<Int64>(0)

    // Pipeline thread.
    private let videoSource: (any CaptureSource)?
    private let audioSource: (any CaptureSource)?
    /// Sources opened by the recorder (standby, snapshots): attached at start, detached at the end
    /// (the recorder stops or keeps them); nil: this session opened its own and stops them.
    private let live: LiveSources?
    /// Frames the live video source had dropped before this recording (while idle).
    private var droppedBefore: Int64 = 0
    /// Every decision of the pipeline (cuts, stall, stop completion, failures, publishing).
    private var machine: SessionMachine!
    private let converter: PixelConverter?
    /// Each take's video gets a fresh encoder (the last one drained first), so no frame refers
    /// across a take's start and an undo drops exactly what the encoder holds of the removed take.
    private var h264: H264Encoder?
    /// Frames given to `h264`.
    private var h264Frames = 0
    private var aac: AACEncoder?
    /// Encodes what the pipeline keeps of the audio, through `encodeAAC`, off the pipeline thread.
    private var aacThread: AudioEncoderThread?
    /// After an undo the AAC encoder is new: its packet times plus this are the file's, and its
    /// packets before `aacKeepFrom` (priming and the re-encoded context) are dropped.
    private var aacOffset: Int64 = 0
    private var aacKeepFrom: Int64 = .min
    /// The last samples given to the AAC encoder (interleaved), and each take's copy of them at
    /// its start: what an undo re-primes a fresh encoder with, so the packet at the join is whole.
    private var history: AudioHistory
    private var takeHistory: [Int: (start: Int64, samples: [Int16])] = [:]
    private var mux: MP4Writer
    private let syncer: FileSyncer?
    private let partLock: PartFileLock
    fileprivate var syncerClosed = false
    /// The write failure is a failed fdatasync (`takeSyncFailure`), not a failed write.
    private var failedSyncing = false
    private var fifo: AudioFifo
    private let resampler: DriftResampler?
    private var drift: DriftLock?
    private let silence: [Int16]
    private var dropsReported: Int64 = 0
    private var dropsReportedAt: Nanos = 0
    /// Audio peak meter: per-channel peak of the current ~100 ms bucket, and the last 10 buckets.
    private var peakBucket: [Int32] = []
    private var peakWindow: [[Int32]] = []
    private var peakRotatedAt: Nanos = 0
    /// Takes up to this number have been announced closed (`Notice.takeKept`).
    private var takesKept = 0
    // Liveness (Health.swift): registered in start(), removed when the pipeline finishes.
    private let health: HealthMonitor?
    private var pipelineBeat: Heartbeat?
    private var videoBeat: Heartbeat?
    private var audioBeat: Heartbeat?

    /// Requests at fixed source times (ns after T0), applied before the pipeline starts.
    private let schedule: [(Timeline.Request, Nanos)]
    /// The first take's label (nil: none, its chapter is "Take 1").
    private let label: String?

    package init(config: RecorderConfig, partPath: String, finalPath: String, logger: Logger, health: HealthMonitor? = nil,
         schedule: [(Timeline.Request, Nanos)] = [], label: String? = nil, sources: LiveSources? = nil) throws {
        self.config = config
        self.label = label
        self.health = health
        self.schedule = schedule
        self.partPath = partPath
        self.finalPath = finalPath
        self.logger = logger
        live = sources
        let (vs, aso) = try sources.map { ($0.video, $0.audio) } ?? config.openSources(logger: logger)
        videoSource = vs
        audioSource = aso
        if let f = config.videoFormat {
            // A file source hands over I420 (it converts as it reads); the converter then only views the slot.
            converter = try PixelConverter(width: f.width, height: f.height,
                                           from: (vs as? FileVideoSource)?.delivers ?? f.pixelFormat)
            h264 = try H264Encoder(width: f.width, height: f.height, fps: f.fps, settings: config.h264)
        } else { converter = nil; h264 = nil }
        if let f = config.audioFormat {
            aac = try AACEncoder(format: f, settings: config.aac)
            if aac!.bitrate < config.aac.bitrate {
                logger.info("AAC at \(f.sampleRate) Hz, \(f.channels) channel(s) carries at most \(aac!.bitrate) b/s: audio_bitrate \(config.aac.bitrate) is lowered to it")
            }
            // An undo re-encodes from one AAC frame before the packet holding the take's first
            // sample: at most two frames of context. Each take keeps a copy (a few KiB a take).
            history = AudioHistory(channels: f.channels, frames: 2 * aac!.frameSize)
            fifo = AudioFifo(channels: f.channels, capacityFrames: f.sampleRate * 10)
            silence = [Int16](repeating: 0, count: 1024 * f.channels)
            resampler = config.driftLock ? try DriftResampler(format: f) : nil
            drift = config.driftLock ? DriftLock(rate: f.sampleRate) : nil
        } else {
            aac = nil
            history = AudioHistory(channels: 1, frames: 0)
            resampler = nil
            fifo = AudioFifo(channels: 1, capacityFrames: 1)
            silence = []
        }
        // A fragment every 0.5 s of media: a crash loses at most that plus the encoder delay (< 1 s).
        mux = try MP4Writer(path: partPath, video: h264, audio: aac, fragmentMicros: 500_000)
        partLock = PartFileLock(path: partPath, logger: logger)
        // fsync = fragment: each fragment is synced by a thread of its own, so a power cut loses
        // at most about a second and the pipeline never waits on the disk.
        if config.fsync == .fragment {
            let syncer = try FileSyncer(path: partPath, logger: logger)
            mux.onFragmentWritten = { syncer.request() }
            self.syncer = syncer
        } else { syncer = nil }
        if let f = config.audioFormat {
            // 2 s: far more than the AAC thread ever lags (it encodes ~100x faster than real time).
            // The session outlives the thread: finish() closes it.
            aacThread = AudioEncoderThread(channels: f.channels, capacityFrames: f.sampleRate * 2,
                                           priority: config.paced ? .normal : .idle) { [unowned self] in
                try encodeAAC($0)
            }
        }
    }

    /// How long a requester waits for the pipeline's answer; a request not taken by then is
    /// cancelled (never applied), one taken is awaited up to `requestGraceNs` longer.
    package static let requestWaitNs: Nanos = 10 * nanosPerSecond
    static let requestGraceNs: Nanos = 60 * nanosPerSecond

    /// Removes the last take (see `Timeline.undo`), only if it is take `expecting` when given;
    /// blocks briefly.
    package func undo(expecting: Int? = nil, deadline: Nanos? = nil) -> UndoOutcome {
        let now = SystemClock.now()
        let reply = DeadlineReply<UndoOutcome>(deadline: deadline ?? now + Self.requestWaitNs)
        let at: Nanos? = config.paced ? now : nil
        guard queue.put(.undo(at: at, expecting: expecting, reply: reply)) else { return .refused("cannot undo: the recording is finishing") }
        switch reply.wait(grace: Self.requestGraceNs) {
        case let .answered(outcome): return outcome
        case .cancelled: return .failed(Self.givenUp("undo", within: reply.deadline - now))
        case .unanswered: return .failed(Self.unanswered("undo"))
        }
    }

    private static func givenUp(_ what: String, within: Nanos = requestWaitNs) -> String {
        "cannot \(what): the pipeline did not answer within \((within + nanosPerSecond / 2) / nanosPerSecond) s (it is overloaded); the \(what) was cancelled and not applied, so it is safe to try again (see 'reelctl status')"
    }
    private static func unanswered(_ what: String) -> String {
        "the \(what) was taken by the pipeline but not answered within \((requestWaitNs + requestGraceNs) / nanosPerSecond) s: it may have been applied (check 'reelctl status' and 'reelctl takes' before trying again)"
    }

    /// The camera this recording captures from, for `controls` and `set` while recording.
    package var camera: V4L2VideoSource? { videoSource as? V4L2VideoSource }

    package var sourceDescriptions: (video: String?, audio: String?) { (videoSource?.description, audioSource?.description) }

    package var snapshot: SessionSnapshot { monitor.withLock { snapshotValue } }

    /// The recorder's live sources this recording uses (nil: its own).
    package var liveSources: LiveSources? { live }

    /// Starts the sources at a common T0 and the pipeline thread. With live sources already
    /// streaming (standby), `requestedAt` is the start instant: what they captured from then on
    /// (held since `LiveSources.arm`) is recorded, nothing before.
    package func start(requestedAt: Nanos? = nil) {
        let now = SystemClock.now()
        let t0 = live != nil ? min(requestedAt ?? now, now) : now
        lastVideoArrival.store(now, ordering: .relaxed)
        var mc = SessionMachine.Configuration(videoFPS: videoSource == nil ? nil : config.videoFormat?.fps,
                                              videoTimeBase: h264?.timeBase ?? Rational(1, 90_000),
                                              audio: config.audioFormat, paced: config.paced)
        mc.stallLimit = Self.videoStallTimeout
        mc.audioBacklogLimit = fifo.capacity
        mc.maxDuration = config.maxDuration
        machine = SessionMachine(mc, start: t0, schedule: schedule, label: label)
        if let health {
            pipelineBeat = health.register("pipeline thread")
            if videoSource != nil { videoBeat = health.register("video capture thread") }
            if audioSource != nil { audioBeat = health.register("audio capture thread") }
        }
        droppedBefore = live?.videoDropped ?? 0
        aacThread?.start()
        NamedThread.start("reel-pipeline") { [self] in run() }
        if let live {
            live.attach(self)
            live.start(at: t0)  // not yet streaming (no standby): they start now, as a session's own would
            return
        }
        videoSource?.start(at: t0, sink: self)
        audioSource?.start(at: t0, sink: self)
    }

    // MediaSink, called on capture threads.
    package func deliver(_ event: MediaEvent, wait: Bool) -> Bool {
        let beat: Heartbeat?
        switch event {
        case .video:
            beat = videoBeat
            lastVideoArrival.store(SystemClock.now(), ordering: .relaxed)
        case .audio: beat = audioBeat
        case .sourceFailed, .ended: beat = nil
        }
        beat?.beat()
        if TestHooks.freezeCapturePath != nil, beat != nil, beat === (videoBeat ?? audioBeat) { freezeForTest() }
        return wait ? queue.put(.media(event)) : queue.offer(.media(event))
    }

    /// Unpaced interleaving (see `MediaSink.awaitTurn`): a stream more than `unpacedSlack` of media
    /// time ahead of the other waits, unless the other has finished or the recording is closing.
    package func awaitTurn(video: Bool, at t: Nanos) {
        guard videoSource != nil, audioSource != nil else { return }
        let me = video ? 0 : 1, other = 1 - me
        turn.withLock {
            position[me] = t
            turn.broadcast()
            while !queue.isClosed {
                guard let theirs = position[other] else {
                    if (video ? audioSource : videoSource)?.hasExited == true { return }
                    turn.wait(until: SystemClock.now() + 50_000_000); continue
                }
                if t <= theirs + Self.unpacedSlack { return }
                // The other stream may have ended: its thread exits without posting again.
                if (video ? audioSource : videoSource)?.hasExited == true { return }
                turn.wait(until: SystemClock.now() + 50_000_000)
            }
        }
    }

    /// Test-only (REEL_TEST_FREEZE_CAPTURE): blocks this capture thread while the trigger file
    /// exists, until the recording closes. Polls at 20 ms: a test hook, not synchronisation.
    private func freezeForTest() {
        guard TestHooks.freezeRequested() else { return }
        logger.warning("test hook \(TestHooks.freezeCaptureVariable): freezing the capture thread")
        while TestHooks.freezeRequested() && !queue.isClosed { SystemClock.sleep(until: SystemClock.now() + 20_000_000) }
    }

    /// Test-only (REEL_TEST_STALL_PIPELINE): holds the pipeline thread while the trigger file
    /// exists. Polls at 20 ms: a test hook, not synchronisation.
    private func stallForTest() {
        guard TestHooks.pipelineStallRequested() else { return }
        logger.warning("test hook \(TestHooks.stallPipelineVariable): stalling the pipeline thread")
        while TestHooks.pipelineStallRequested() { SystemClock.sleep(until: SystemClock.now() + 20_000_000) }
        logger.warning("test hook \(TestHooks.stallPipelineVariable): the pipeline thread goes on")
    }

    /// Asks the pipeline for a pause, resume or stop at the current instant; `label` names the take
    /// a resume begins (nil: none, its chapter is "Take N"). Blocks briefly.
    /// `deadline`: when the requester gives up (default `requestWaitNs` from now); a stop on
    /// shutdown or a signal waits as long as the stop itself may take.
    package func request(_ r: Timeline.Request, label: String? = nil, deadline: Nanos? = nil) -> Outcome {
        let now = SystemClock.now()
        let reply = DeadlineReply<Outcome>(deadline: deadline ?? now + Self.requestWaitNs)
        let at: Nanos? = config.paced ? now : nil // unpaced: at the media position reached
        guard queue.put(.request(r, at: at, label: label, reply: reply)) else { return .refused("cannot \(r): the recording is finishing") }
        switch reply.wait(grace: Self.requestGraceNs) {
        case let .answered(outcome): return outcome
        case .cancelled: return .failed(Self.givenUp("\(r)", within: reply.deadline - now))
        case .unanswered: return .failed(Self.unanswered("\(r)"))
        }
    }

    // MARK: Pipeline thread

    /// The thin loop: takes what the queue holds (or wakes every 20 ms), hands it to the machine
    /// and performs what the machine decides; every decision is in `SessionMachine`. An error
    /// goes to the machine, whose next action is then to finish.
    private func run() {
        var ending: SessionMachine.Ending = .complete
        loop: while true {
            pipelineBeat?.beat()
            let event = queue.take(until: SystemClock.now() + 20_000_000)
            if event != nil, TestHooks.stallPipelinePath != nil { stallForTest() }
            machine.wake(now: SystemClock.now(), lastVideoArrival: lastVideoArrival.load(ordering: .relaxed))
            do {
                if let event { try handle(event) }
                // A failed fdatasync, seen by the sync thread, ends the recording as a failed write does.
                if takeSyncFailure() { throw mux.writeFailure! }
                // The AAC thread's failure (a failed write there sets mux.writeFailure as here).
                if let e = aacThread?.takeFailure() { throw e }
            } catch { failed(error) }
            let now = SystemClock.now()
            while let action = machine.nextAction(now: now, queueWasEmpty: event == nil, sourceExited: { video in
                (video ? videoSource : audioSource)?.hasExited ?? true
            }) {
                if case let .finish(e) = action { ending = e; break loop }
                do { try perform(action) } catch { failed(error) }
            }
        }
        finish(ending)
    }

    private func failed(_ error: any Error) {
        let failure = machine.fail(mux.writeFailure != nil ? .write("\(error)") : .pipeline("\(error)"))
        // A failed write is reported once, with what was kept, when the file is finished.
        if mux.writeFailure == nil { logger.error("recording \(partPath) failed: \(failure)", metadata: RecordingLog.fields(nil, file: finalPath, part: partPath)) }
    }

    private func perform(_ action: SessionMachine.Action) throws {
        switch action {
        case let .encodeAudio(n):
            guard aac != nil else { return }
            let channels = fifo.channels  // read before consume(): it holds exclusive access to fifo
            fifo.consume(n) { samples in
                meterPeak(samples, channels: channels)
                encodeAudio(samples)
            }
        case let .dropAudio(n): fifo.discard(n)
        case let .beginTake(t, start):
            takeHistory[t.number] = (start, history.last())
            aacThread?.quiesce()  // as for a take's video start (handle .video)
            try mux.beginTake(index: t.number, label: t.label, start: start)
        case let .beginAudioTake(t, start):
            takeHistory[t.number] = (start, history.last())
            aacThread?.quiesce()  // as for a take's video start (handle .video)
            try mux.beginAudioTake(index: t.number, label: t.label, sample: start)
        case let .encodeSilence(n): encodeSilence(n)
        case let .stopForSourceFailure(msg): logger.error("\(msg); finishing the recording \(partPath)")
        case .publish: publish()
        case let .completeWithSilence(n):
            if n > 0 {
                let ns = config.audioFormat.map { $0.sampleTime(Int64(n)) } ?? 0
                let ms = "\(ns / 1_000_000).\(ns / 100_000 % 10) ms"
                logger.warning("the audio ended \(n) samples (\(ms)) before the recording's end; filled with silence (\(partPath))")
            }
            encodeSilence(n)
        case let .lengthCapReached(cap):
            logger.notice("\(partPath) reached its length cap of \(formatDuration(cap)); stopping")
            onNotice?(.capReached(cap))
        case .finish: break  // run() ends the loop
        }
    }

    /// Gives kept samples to the history and to the AAC thread (which encodes them, `encodeAAC`).
    private func encodeAudio(_ samples: UnsafeBufferPointer<Int16>) {
        history.append(samples)
        guard let aacThread else { return }
        aacThread.submit(samples.baseAddress, frames: samples.count / aacThread.ring.channels)
    }

    /// AAC thread: samples to the encoder, its packets to the file in file time.
    private func encodeAAC(_ samples: UnsafeBufferPointer<Int16>) throws {
        try aac?.encode(interleaved: samples, writeAAC)
    }

    /// An AAC packet to the file, in file time (see `aacOffset`).
    private func writeAAC(_ p: Packet) throws {
        guard p.pts + aacOffset >= aacKeepFrom else { return }
        try mux.writeAudio(Packet(data: p.data, pts: p.pts + aacOffset, dts: p.dts + aacOffset, duration: p.duration,
                                  isKeyframe: p.isKeyframe))
    }

    /// Drains the AAC encoder into nothing (libavcodec warns about frames left at close): for an
    /// encoder whose output is not wanted.
    private func discardAAC() { try? aac?.flush { _ in } }

    /// A new x264 with the same settings (so the same SPS/PPS; its first frame is an IDR). `drain`:
    /// the old one's frames are written first; else they are dropped (an undo).
    private func renewVideoEncoder(drain: Bool) throws {
        guard h264 != nil, let f = config.videoFormat else { return }
        if drain { try h264!.flush { try mux.writeVideo($0) } }
        // The old one is freed before the new one allocates (no local keeps it): the new one
        // reuses its memory. Two at once left the heap holding both for the rest of the
        // recording (+13 MiB of RSS at 320x180 from the first take on).
        h264 = nil
        h264 = try H264Encoder(width: f.width, height: f.height, fps: f.fps, settings: config.h264)
        h264Frames = 0
    }

    /// Performs an undo the machine accepted: the file goes back to where the take began, the
    /// encoders drop what they hold of it (fresh ones, the AAC one primed with the kept samples
    /// before the join), and the next take continues there.
    private func rollBack(_ rb: SessionMachine.Rollback) throws {
        let started = SystemClock.now()
        // The AAC thread has written all it was given and waits: the encoder and the file are the pipeline's.
        aacThread?.quiesce()
        if h264 != nil { try renewVideoEncoder(drain: false) }
        if rb.take == 1 {
            // No take left: the file starts again (same path and inode, so the lock and the syncer hold).
            mux = try MP4Writer(path: partPath, video: h264, audio: aac, fragmentMicros: mux.fragmentMicros, restart: true)
            if let syncer { mux.onFragmentWritten = { syncer.request() } }
            // The emptied file is on the disk before the undo is answered (as a cut take's is).
            try mux.sync("starting it again (undo of take 1)")
            if let f = config.audioFormat {
                discardAAC()
                aac = try AACEncoder(format: f, settings: config.aac)
                history.clear()
            }
            aacOffset = 0; aacKeepFrom = .min
            takeHistory.removeAll()
        } else {
            let resume = try mux.rollback(take: rb.take)
            if let f = config.audioFormat, let resume {
                // The fresh encoder starts one AAC frame before the first packet to replace, fed the
                // kept samples from there to the join, so that packet overlaps its neighbour whole.
                let fresh = try AACEncoder(format: f, settings: config.aac)
                let base = resume - Int64(fresh.frameSize)
                let (start, before) = takeHistory[rb.take] ?? (rb.audioSamples, history.last())
                if start != rb.audioSamples {
                    logger.warning("undo of take \(rb.take): its audio began at sample \(start), the undo goes back to \(rb.audioSamples)")
                }
                let need = Int(start - base) * f.channels
                var context = [Int16](repeating: 0, count: need)
                let have = min(need, before.count)
                context.replaceSubrange((need - have)..<need, with: before.suffix(have))
                discardAAC()
                aac = fresh
                aacOffset = base
                aacKeepFrom = resume
                history.clear()
                context.withUnsafeBufferPointer { encodeAudio($0) }
            }
        }
        takeHistory = takeHistory.filter { $0.key < rb.take }
        // The next take gets the removed one's number: it is announced kept when it closes.
        takesKept = min(takesKept, rb.take - 1)
        logger.info("undo of take \(rb.take): \(rb.framesRemoved) frames and \(rb.samplesRemoved) samples removed in \((SystemClock.now() - started) / 1_000_000) ms (\(partPath))")
    }

    private func handle(_ event: Event) throws {
        switch event {
        case let .undo(at, expecting, reply):
            guard reply.take(now: SystemClock.now()) else { return logGivenUp("undo", waited: reply.deadline) }
            switch machine.undo(at: at, expecting: expecting) {
            case let .success(rb):
                do { try rollBack(rb) } catch {
                    reply.fulfill(.failed("cannot undo take \(rb.take): \(error)"))
                    throw error
                }
                publish()
                reply.fulfill(.ok(number: rb.take, label: rb.label))
            case let .failure(error):
                reply.fulfill(.refused(error.description))
            }
        case let .request(r, at, label, reply):
            guard reply.take(now: SystemClock.now()) else { return logGivenUp("\(r)", waited: reply.deadline) }
            switch machine.request(r, at: at, label: label) {
            case let .success(phase):
                logger.info("\(r) requested (\(partPath))")
                publish()
                reply.fulfill(.ok(phase))
            case let .failure(error):
                reply.fulfill(.refused(error.description))
            }
        case let .media(.video(slot, time)):
            defer { videoSource!.pool.release(slot) }
            guard case let .encode(pts, newTake) = machine.video(at: time), let converter, h264 != nil else { return }
            if let t = newTake {
                // A take's video starts on a fresh encoder: the last take's frames all go out first.
                if h264Frames > 0 { try renewVideoEncoder(drain: true) }
                // Its marker goes in at its clean cut (chapters at stop; an undo cuts back to it).
                // The AAC thread first writes all it was given of the last take, so the file hears
                // of the take's start in the same order as when one thread wrote both tracks: a
                // take shorter than that thread's lag is not cut before its audio reached it.
                aacThread?.quiesce()
                try mux.beginTake(index: t.number, label: t.label, start: pts)
            }
            let frame = try converter.convert(UnsafeRawBufferPointer(videoSource!.pool.buffer(slot)))
            h264Frames += 1
            try h264!.encode(frame, pts: pts) { try mux.writeVideo($0) }
        case let .media(.audio(slot, frames, sample, time)):
            defer { audioSource!.pool.release(slot) }
            let take = machine.audio(frames: frames, sample: sample, time: time)
            // Samples the source lost: silence keeps every later sample at its true time.
            if take.silence > 0 { try acceptAudio(nil, frames: take.silence, time: take.silenceTime) }
            guard take.frames > 0 else { return }
            let base = UnsafeRawPointer(audioSource!.pool.buffer(slot).baseAddress!).assumingMemoryBound(to: Int16.self)
            let ch = config.audioFormat!.channels
            try acceptAudio(UnsafeBufferPointer(start: base + take.skip * ch, count: take.frames * ch), frames: take.frames,
                            time: take.time)
        case let .media(.sourceFailed(msg)):
            machine.sourceFailed(msg)
        case let .media(.ended(msg, at, isVideo)):
            // The samples still inside the drift-lock filter are the file's last ones: out with them.
            if !isVideo, let resampler, let anchor = drift?.anchor {
                try resampler.flush { try queueLocked($0, anchor: anchor) }
            }
            // A file ran out (the machine says whether that ends the recording).
            if machine.sourceEnded(at: at, isVideo: isVideo) { logger.notice("\(msg); the recording ends there (\(partPath))") }
            else { logger.notice("\(msg) (\(partPath))") }
        }
    }

    /// A request reached past its deadline: its requester was told it was not applied.
    private func logGivenUp(_ what: String, waited deadline: Nanos) {
        let late = formatDuration(SystemClock.now() - deadline)
        logger.warning("\(what) given up by its requester (its answer was due \(late) ago): cancelled, not applied (\(partPath))")
    }

    /// Takes delivered samples (nil: `frames` of silence for samples the source lost) into the
    /// pending FIFO, through the drift-lock resampler when it is on.
    private func acceptAudio(_ samples: UnsafeBufferPointer<Int16>?, frames: Int, time: Nanos) throws {
        guard let resampler else {
            try machine.audioQueued(frames: frames, captureTime: time)
            fifo.append(samples?.baseAddress, frames: frames)
            return
        }
        if samples != nil {
            // Real samples carry a capture time: steer the resampler (a gap's time is only estimated).
            let c = drift!.compensation(captureTime: time, outputPosition: resampler.outputPosition)
            try resampler.setCompensation(delta: c.delta, distance: c.distance)
        }
        let anchor = drift!.anchor ?? time  // output sample 0 of the locked stream
        try resampler.process(samples, silentFrames: frames) { try queueLocked($0, anchor: anchor) }
    }

    /// The drift-lock resampler's output into the pending FIFO (timed from its output sample 0).
    private func queueLocked(_ out: UnsafeBufferPointer<Int16>, anchor: Nanos) throws {
        let n = out.count / fifo.channels
        try machine.audioQueued(frames: n, captureTime: anchor)
        fifo.append(out.baseAddress, frames: n)
    }

    private func encodeSilence(_ frames: Int) {
        guard aac != nil, let f = config.audioFormat else { return }
        var left = frames
        silence.withUnsafeBufferPointer { zeros in
            while left > 0 {
                let n = min(left, 1024)
                encodeAudio(UnsafeBufferPointer(rebasing: zeros[0..<(n * f.channels)]))
                left -= n
            }
        }
    }

    /// Folds kept (encoded) samples into the current peak bucket. Silence filled in for lost or
    /// missing samples is not metered: it is zero anyway.
    /// Unsafe: `samples` is the FIFO's storage lent by `consume` for this call only; read in bounds.
    private func meterPeak(_ samples: UnsafeBufferPointer<Int16>, channels ch: Int) {
        if peakBucket.count != ch { peakBucket = [Int32](repeating: 0, count: ch) }
        var i = 0
        while i + ch <= samples.count {
            for c in 0..<ch {
                let v = Int32(samples[i + c]).magnitude  // -32768 → 32768
                if Int32(v) > peakBucket[c] { peakBucket[c] = Int32(v) }
            }
            i += ch
        }
    }

    /// The per-channel peak over the last 10 buckets of >= 100 ms plus the current one (~1 s).
    private func meteredPeak(now: Nanos) -> [Int32] {
        guard config.audioFormat != nil else { return [] }
        let ch = fifo.channels
        if peakBucket.count != ch { peakBucket = [Int32](repeating: 0, count: ch) }
        var peak = peakBucket
        for bucket in peakWindow { for c in 0..<ch { peak[c] = max(peak[c], bucket[c]) } }
        if now - peakRotatedAt >= 100_000_000 {
            peakWindow.append(peakBucket)
            if peakWindow.count > 10 { peakWindow.removeFirst() }
            peakBucket = [Int32](repeating: 0, count: ch)
            peakRotatedAt = now
        }
        return peak
    }

    /// Drops go to the log as they happen, at most every 10 s, with the count since the last
    /// report: status shows the total, the journal shows when.
    private func reportDrops(_ total: Int64) {
        guard total > dropsReported else { return }
        let now = SystemClock.now()
        guard now - dropsReportedAt >= 10 * nanosPerSecond else { return }
        logger.warning("\(total - dropsReported) video frame(s) dropped since the last report, \(total) in all (lost by the camera, or the pipeline fell behind it: CPU busy or the disk slow; \(partPath))")
        dropsReported = total
        dropsReportedAt = now
    }

    private func publish() {
        var s = SessionSnapshot()
        s.audioPeak = meteredPeak(now: SystemClock.now())
        s.bytesWritten = mux.bytesWritten
        let p = machine.progress
        s.phase = p.phase
        s.stopping = p.stopping
        s.frames = p.frames
        s.audioSamples = p.audioSamples
        s.audioFilledSamples = p.audioFilledSamples
        s.droppedFrames = (videoSource?.dropped ?? 0) - droppedBefore + p.droppedFrames
        s.timestampFixes = p.timestampFixes
        reportDrops(s.droppedFrames)
        // Recorded duration: the output reached so far (video frame end, or audio length).
        s.recordedNs = p.recordedNs
        s.segmentDurations = p.segmentDurations
        s.takes = p.takes
        s.remaining = p.remaining
        s.capReached = p.capReached
        s.origin = p.origin
        monitor.withLock { snapshotValue = s }
        // Takes closed since the last snapshot (published on every request and at the end).
        for t in p.takes where t.number > takesKept && t.duration != nil {
            takesKept = t.number
            onNotice?(.takeKept(t))
        }
    }

    /// Drains the encoders, writes the trailer, renames NAME.mp4.part to NAME.mp4. On failure the
    /// .part file (fragmented, so playable up to its last fragment) is still finalised if possible.
    private func finish(_ ending: SessionMachine.Ending) {
        queue.close()
        for b in [pipelineBeat, videoBeat, audioBeat] { health?.unregister(b) }
        if let live { live.detach() } else {
            videoSource?.stop()
            audioSource?.stop()
        }
        while let e = queue.take(until: 0) {
            switch e {
            case let .request(_, _, _, reply): reply.fulfill(.refused("the recording is finishing"))
            case let .undo(_, _, reply): reply.fulfill(.refused("cannot undo: the recording is finishing"))
            // Live sources outlive the recording: their slots go back.
            case let .media(.video(slot, _)): videoSource?.pool.release(slot)
            case let .media(.audio(slot, _, _, _)): audioSource?.pool.release(slot)
            case .media: break
            }
        }
        var finishError: String?
        // Everything kept is encoded and written (or dropped after a failure); the encoder is the pipeline's again.
        var aacError: (any Error)?
        do { try aacThread?.close() } catch { aacError = error }
        // After a failed write nothing more is written (no encoder flush, no trailer): the file is
        // cut back to its last complete fragment below.
        if case .nothingKept = ending, mux.writeFailure == nil {
            // Every take undone: no file is wanted (the encoders' and muxer's leftovers go with it).
            discardAAC()
            _ = try? mux.abandon()
            if unlink(partPath) != 0 { logger.warning("cannot remove \(partPath) (every take was undone): \(Errno.current)") }
            else { logger.info("every take of \(partPath) was undone: removed it") }
        } else if mux.writeFailure == nil {
            do {
                if let aacError { throw aacError }
                try h264?.flush { try mux.writeVideo($0) }
                try aac?.flush(writeAAC)
                try mux.finish()
                closeSyncer()  // the trailer is on disk before the name says the file is complete
                if !takeSyncFailure() {
                    // ftyp, mdat, moov; on failure (logged) the fragmented file, which plays, is kept.
                    Storage.finishMP4(partPath, logger: logger)
                    let by: FinishedBy
                    switch ending {
                    case .sourceFailed: by = .sourceFailed
                    case .failed: by = .error
                    case .complete, .nothingKept: by = machine.progress.capReached ? .cap : .stop
                    }
                    let f = try Handoff.place(part: partPath, final: finalPath, by: by, sync: syncer != nil, logger: logger)
                    monitor.withLock { placed = f }
                }
            } catch let e {
                if mux.writeFailure == nil {
                    finishError = "\(e)"
                    logger.error("finishing \(partPath) failed: \(e)", metadata: RecordingLog.fields(nil, file: finalPath, part: partPath))
                }
            }
        }
        var writeFailure: (kept: RecordingOutcome.Kept, message: String)?
        if let wf = mux.writeFailure {
            // Nothing more is written.
            discardAAC()
            let (file, message) = salvage(wf)
            writeFailure = (file.map { $0 == partPath ? .unrecovered(partPath) : .file($0) } ?? .nothing, message)
        }
        closeSyncer()
        partLock.release()
        publish()
        finished.fulfill(RecordingOutcome.resolve(ending: ending, finishError: finishError, writeFailure: writeFailure,
                                                  file: handedOff?.path ?? finalPath))
    }

    /// A failed fdatasync, seen by the sync thread, ends the recording as a failed write does
    /// (what was written may not be on the disk). True when it did.
    private func takeSyncFailure() -> Bool {
        guard mux.writeFailure == nil, let e = syncer?.failure else { return false }
        mux.markFailed("cannot sync '\(partPath)' to disk: \(Errno.text(e))", systemError: e)
        failedSyncing = true
        return true
    }

    /// After a failed write: the file is closed without another write, cut back to its last
    /// complete fragment and renamed (or removed when no fragment was complete). Returns the file
    /// kept (nil: none; the .part path if it could not be cut or renamed) and the message.
    private func salvage(_ failure: MediaError) -> (file: String?, message: String) {
        closeSyncer()
        let dir = (finalPath as NSString).deletingLastPathComponent
        let code = failure.systemError ?? EIO
        let verb = failedSyncing ? "syncing" : "writing"
        func text(_ kept: WriteFailureText.Kept) -> String {
            WriteFailureText.message(errno: code, verb: verb, part: partPath, kept: kept, dir: dir)
        }
        let kept: (bytes: Int64, micros: Int64)
        do { kept = try mux.abandon() } catch {
            return (partPath, text(.unknown("\(error); it stays as \(partPath), which reeld makes playable at its next start")))
        }
        guard kept.bytes > 0 else {
            unlink(partPath)
            return (nil, text(.nothing))
        }
        if [ENOSPC, EDQUOT].contains(code), !failedSyncing {
            // Out of space, not a failing disk: cutting the incomplete fragment off may have freed
            // the few hundred kB a standard MP4's index needs. If not, the finisher cuts its own
            // partial write off (logged) and the fragmented file, which plays, is kept.
            Storage.finishMP4(partPath, logger: logger)
        }
        let f: FinishedFile
        do { f = try Handoff.place(part: partPath, final: finalPath, by: .writeFailed, sync: syncer != nil, logger: logger) } catch {
            return (partPath, text(.unknown("\(error); reeld renames it at its next start")))
        }
        monitor.withLock { placed = f }
        return (f.path, text(.prefix(micros: kept.micros, file: f.path)))
    }
}


extension RecordingSession {
    /// Last sync and the syncer thread's end; logs what syncing cost. Idempotent.
    fileprivate func closeSyncer() {
        guard let syncer, !syncerClosed else { return }
        syncerClosed = true
        let c = syncer.close()
        logger.debug("fsync of \(partPath): \(c.count) syncs, mean \(c.meanNs / 1000) us, max \(c.maxNs / 1000) us")
    }
}

