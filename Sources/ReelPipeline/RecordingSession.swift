import Foundation
import Logging
import ReelCapture
import ReelCore
import ReelMedia
import ReelStorage
import ReelSystem
import Synchronization

/// One recording: sources -> timeline -> encoders -> MP4, from `start` to the renamed file.
///
/// Threads: each source has its capture thread; the decisions (timeline, cuts, silence), pixel
/// conversion, video encoding and muxing run on this session's pipeline thread, fed by one
/// bounded queue; the audio it decides (kept, dropped, silence) goes to an `AudioEncoderThread`,
/// whose `AudioOutput` crossfades the joins, AAC-encodes and writes. The file is a `PartFile`.
/// Capture threads never wait on either when live: a full pool or queue drops the sample and
/// counts it.
/// @unchecked Sendable: the pipeline's fields are touched only by the pipeline thread once
/// `start()` has launched it; the rest are immutable or thread-safe (`queue`, `monitor`, `turn`,
/// the atomics, the promise, `part`).
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

    package var partPath: String { part.path }
    package var finalPath: String { part.finalPath }
    /// The finished file as `Handoff.place` left it (its name, how it was finished), for
    /// `Handoff.handOn`; nil when no file was finished. Set on the pipeline thread before
    /// `finished` is fulfilled, read after.
    package var handedOff: FinishedFile? { part.placed }
    package let config: RecorderConfig
    let logger: Logger
    /// Sized to hold every slot of both pools at once (`PreRoll.queueCapacity`): a held pre-roll
    /// handed over in one go never overflows it.
    let queue: BlockingQueue<Event>
    /// Fulfilled with how the recording ended when the pipeline thread ends.
    package let finished = Promise<RecordingOutcome>()
    private let monitor = Monitor()
    private var snapshotValue = SessionSnapshot()
    /// Unpaced interleaving: each stream's latest media time (video, audio), guarded by `turn`.
    let turn = Monitor()
    var position: [Nanos?] = [nil, nil]
    static let unpacedSlack: Nanos = 500_000_000
    /// Video not arriving for this long counts as stalled (see `Timeline.videoStalled`).
    static let videoStallTimeout: Nanos = 1_000_000_000
    /// When the last video frame was handed over by the capture thread (CLOCK_MONOTONIC ns).
    let lastVideoArrival = Atomic<Int64>(0)

    // Pipeline thread.
    let videoSource: (any CaptureSource)?
    let audioSource: (any CaptureSource)?
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
    /// The file's AAC stream (what a restarted file's audio track says).
    private let aacStream: AACStream?
    /// The audio the pipeline decides, to the AAC thread's `AudioOutput` (crossfade, encoder, file).
    private var aacThread: AudioEncoderThread?
    private let part: PartFile
    private var mux: MP4Writer { part.writer }
    private var fifo: AudioFifo
    private let resampler: DriftResampler?
    private var drift: DriftLock?
    /// Takes up to this number have been announced closed (`Notice.takeKept`).
    private var takesKept = 0
    // Liveness (Health.swift): registered in start(), removed when the pipeline finishes.
    private let health: HealthMonitor?
    private var pipelineBeat: Heartbeat?
    var videoBeat: Heartbeat?
    var audioBeat: Heartbeat?

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
        self.logger = logger
        live = sources
        let (vs, aso) = try sources.map { ($0.video, $0.audio) } ?? { ($0.video, $0.audio) }(config.openSources(logger: logger))
        videoSource = vs
        audioSource = aso
        queue = BlockingQueue<Event>(capacity: PreRoll.queueCapacity(videoSlots: vs?.pool.slots ?? 0, audioSlots: aso?.pool.slots ?? 0))
        if let f = config.videoFormat {
            // A file source hands over I420 (it converts as it reads); the converter then only views the slot.
            converter = try PixelConverter(width: f.width, height: f.height,
                                           from: (vs as? FileVideoSource)?.delivers ?? f.pixelFormat)
            h264 = try H264Encoder(width: f.width, height: f.height, fps: f.fps, settings: config.h264)
        } else { converter = nil; h264 = nil }
        var firstAAC: AACEncoder?
        if let f = config.audioFormat {
            let aac = try AACEncoder(format: f, settings: config.aac)
            if aac.bitrate < config.aac.bitrate {
                logger.info("AAC at \(f.sampleRate) Hz, \(f.channels) channel(s) carries at most \(aac.bitrate) b/s: audio_bitrate \(config.aac.bitrate) is lowered to it")
            }
            firstAAC = aac
            fifo = AudioFifo(channels: f.channels, capacityFrames: f.sampleRate * 10)
            resampler = config.driftLock ? try DriftResampler(format: f) : nil
            drift = config.driftLock ? DriftLock(rate: f.sampleRate) : nil
        } else {
            resampler = nil
            fifo = AudioFifo(channels: 1, capacityFrames: 1)
        }
        aacStream = firstAAC?.stream
        // An undo replaces every AAC packet whose transform reaches the first sample the join's mix
        // changed: the take's audio boundary leads it by half the crossfade and one packet more.
        let fade = config.audioFormat.map { JoinCrossfade(sampleRate: $0.sampleRate, channels: $0.channels) }
        let lead = fade.map { Int64($0.half) + Int64(firstAAC?.frameSize ?? 0) } ?? 0
        part = try PartFile(path: partPath, finalPath: finalPath, video: h264, audio: aacStream, fsync: config.fsync,
                            audioLead: lead, logger: logger)
        if let f = config.audioFormat, let firstAAC {
            let settings = config.aac
            // nonisolated(unsafe): the AAC thread's alone from here on: used only inside its `consume`.
            nonisolated(unsafe) let output = AudioOutput(channels: f.channels, sampleRate: f.sampleRate, encoder: firstAAC,
                                                         makeEncoder: { try AACEncoder(format: f, settings: settings) },
                                                         write: { [part] in try part.writer.writeAudio($0) })
            // 2 s: far more than the AAC thread ever lags (it encodes ~100x faster than real time).
            aacThread = AudioEncoderThread(channels: f.channels, capacityFrames: f.sampleRate * 2,
                                           priority: config.paced ? .normal : .idle) { try output.consume($0) }
        }
    }

    /// How long a requester waits for the pipeline's answer; a request not taken by then is
    /// cancelled (never applied), one taken is awaited up to `requestGraceNs` longer.
    package static let requestWaitNs: Nanos = 10 * nanosPerSecond
    static let requestGraceNs: Nanos = 60 * nanosPerSecond

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
                if part.takeSyncFailure(), let e = part.writeFailure { throw e }
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
        let failure = machine.fail(part.writeFailure != nil ? .write("\(error)") : .pipeline("\(error)"))
        // A failed write is reported once, with what was kept, when the file is finished.
        if part.writeFailure == nil { logger.error("recording \(partPath) failed: \(failure)", metadata: RecordingLog.fields(nil, file: finalPath, part: partPath)) }
    }

    private func perform(_ action: SessionMachine.Action) throws {
        switch action {
        case let .encodeAudio(n):
            guard let aacThread else { return }
            let channels = fifo.channels  // read before consume(): it holds exclusive access to fifo
            var left = n
            while left > 0 {
                // Silence filled in for lost samples goes as such: the output fades around it.
                let run = fifo.run(upTo: left)
                fifo.consume(run.frames) { samples in
                    machine.meterKept(samples, channels: channels)
                    aacThread.submit(run.gap ? .gap : .keep, samples.baseAddress!, frames: samples.count / channels)
                }
                left -= run.frames
            }
        case let .dropAudio(n):
            // The dropped samples are the far side of a join: the crossfade takes what it needs of them.
            guard let aacThread else { return fifo.discard(n) }
            let channels = fifo.channels
            fifo.consume(n) { aacThread.submit(.drop, $0.baseAddress!, frames: $0.count / channels) }
        case let .beginTake(t, start):
            aacThread?.quiesce()  // as for a take's video start (handle .video)
            try mux.beginTake(index: t.number, label: t.label, start: start)
            aacThread?.submit(.beginTake(number: t.number, start: start))
        case let .beginAudioTake(t, start):
            aacThread?.quiesce()  // as for a take's video start (handle .video)
            try mux.beginAudioTake(index: t.number, label: t.label, sample: start)
            aacThread?.submit(.beginTake(number: t.number, start: start))
        case let .encodeSilence(n): aacThread?.submitSilence(frames: n)
        case let .stopForSourceFailure(msg): logger.error("\(msg); finishing the recording \(partPath)")
        case .publish: publish()
        case let .completeWithSilence(n):
            if n > 0 {
                let ns = config.audioFormat.map { $0.sampleTime(Int64(n)) } ?? 0
                let ms = "\(ns / 1_000_000).\(ns / 100_000 % 10) ms"
                logger.warning("the audio ended \(n) samples (\(ms)) before the recording's end; filled with silence (\(partPath))")
            }
            aacThread?.submitSilence(frames: n)
        case let .lengthCapReached(cap):
            logger.notice("\(partPath) reached its length cap of \(formatDuration(cap)); stopping")
            onNotice?(.capReached(cap))
        case .finish: break  // run() ends the loop
        }
    }

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
    /// encoders drop what they hold of it (a fresh x264; the AAC thread's `AudioOutput` re-primes
    /// a fresh AAC encoder and restores the outgoing side of the join), and the next take
    /// continues there.
    private func rollBack(_ rb: SessionMachine.Rollback) throws {
        let started = SystemClock.now()
        // The AAC thread has written all it was given and waits: no packet of the take follows the cut.
        aacThread?.quiesce()
        if h264 != nil { try renewVideoEncoder(drain: false) }
        if rb.take == 1 {
            // No take left: the file starts again (same path and inode, so the lock and the syncer hold).
            try part.restart(video: h264, audio: aacStream)
            aacThread?.submit(.rollBack(take: 1, resume: nil, to: 0))
        } else {
            let resume = try mux.rollback(take: rb.take)
            aacThread?.submit(.rollBack(take: rb.take, resume: resume, to: rb.audioSamples))
        }
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
    /// Silence for lost samples is marked in the FIFO as filled in (`AudioFifo.markGap`): the
    /// output fades out before it and in after it (`AudioOutput`). Through the resampler the mark
    /// is what this call put out, within the filter's delay (under a millisecond) of the gap.
    private func acceptAudio(_ samples: UnsafeBufferPointer<Int16>?, frames: Int, time: Nanos) throws {
        let before = fifo.appended
        defer { if samples == nil { fifo.markGap(from: before) } }
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

    /// Drops go to the log as they happen, at most every 10 s (`DropReports`).
    private func reportDrops(_ total: Int64) {
        guard let r = machine.dropsToReport(total: total, now: SystemClock.now()) else { return }
        logger.warning("\(r.new) video frame(s) dropped since the last report, \(r.total) in all (lost by the camera, or the pipeline fell behind it: CPU busy or the disk slow; \(partPath))")
    }

    private func publish() {
        var s = SessionSnapshot()
        s.audioPeak = machine.audioPeak(now: SystemClock.now())
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
        // The AAC thread lets its delay line out and drains the encoder (or drops it all when no
        // audio is wanted), writes, and ends.
        let wanted: Bool
        if case .nothingKept = ending { wanted = false } else { wanted = part.writeFailure == nil }
        aacThread?.submit(wanted ? .finish : .discard)
        var aacError: (any Error)?
        do { try aacThread?.close() } catch { aacError = error }
        // After a failed write nothing more is written (no encoder flush, no trailer): the file is
        // cut back to its last complete fragment below.
        if case .nothingKept = ending, part.writeFailure == nil {
            // Every take undone: no file is wanted (the encoders' and muxer's leftovers go with it).
            part.discard()
        } else if part.writeFailure == nil {
            do {
                if let aacError { throw aacError }
                try h264?.flush { try mux.writeVideo($0) }
                let by: FinishedBy
                switch ending {
                case .sourceFailed: by = .sourceFailed
                case .failed: by = .error
                case .complete, .nothingKept: by = machine.progress.capReached ? .cap : .stop
                }
                _ = try part.finish(by: by, videoEnd: machine.videoEndPTS)
            } catch let e {
                if part.writeFailure == nil {
                    finishError = "\(e)"
                    logger.error("finishing \(partPath) failed: \(e)", metadata: RecordingLog.fields(nil, file: finalPath, part: partPath))
                }
            }
        }
        var writeFailure: (kept: RecordingOutcome.Kept, message: String)?
        if let wf = part.writeFailure {
            // Nothing more is written.
            let (file, message) = part.salvage(wf)
            writeFailure = (file.map { $0 == partPath ? .unrecovered(partPath) : .file($0) } ?? .nothing, message)
        }
        part.close()
        publish()
        finished.fulfill(RecordingOutcome.resolve(ending: ending, finishError: finishError, writeFailure: writeFailure,
                                                  file: handedOff?.path ?? finalPath))
    }
}
