/// The recording pipeline's decisions, from the first frame to the finished file: a pure value-type
/// state machine over an injected clock, as `Timeline` is for the cuts. The pipeline thread feeds
/// it what happened (a wake at time T, a request, a frame, a chunk of audio, a source that failed
/// or ended, a failure) and performs what it returns; it owns the `Timeline` and the frame grid.
/// No I/O, no threads, no clock: every time is CLOCK_MONOTONIC ns passed in by the caller.
///
/// The driver's loop, once per item taken from the queue (or per empty wait of about 20 ms):
/// `wake(now:lastVideoArrival:)`, then the event (`request`, `video`, `audio` and for each
/// chunk put in the pending FIFO `audioQueued`, `sourceFailed`, `sourceEnded`), then
/// `nextAction` until nil; the loop ends after `.finish`. An error while performing an action
/// goes to `fail`, which ends the recording at once.
///
/// The rules:
/// - Requests. A pause, resume or stop takes effect at the instant it carries (paced: when it was
///   asked), else at the horizon (unpaced: the media position reached). Accepted, it is published
///   before the requester is answered, so the requester's next status shows it. A stop drops the
///   requests a schedule placed after it (`Timeline.stopBeforeLaterRequests`): SIGTERM ends a
///   one-shot recording there, not at its `--duration`.
/// - Paced: each wake tells the timeline that no request can come earlier than now. Video that
///   has not *arrived* for more than `stallLimit` is stalled: cuts requested up to
///   `now - stallLimit` resolve at their request instants, so a camera that hangs without an error
///   holds neither the cuts nor the audio behind them. Judged on arrivals (the capture side's
///   last handover), never on how far behind the pipeline is: queued frames still cut on the grid.
/// - Video. A kept frame takes the output frame slot nearest its output time (`FrameSlots`); a
///   taken slot drops it. Its pts is that slot in the encoder's time base, forced strictly
///   increasing (each fix counted).
/// - The end. A stop asked while recording, resolved on a frame, ends the audio on the frame
///   grid too: at the slot that frame would take, or the slot after the last frame's when that
///   one is taken, so audio and video end together however the frames jitter. Only when the
///   last take encoded a frame; the cap's stop is exact already, and a stop while paused ends
///   where the pause cut.
/// - Undo (`undo`): the timeline removes the last take; the frame slots, the last pts and the
///   frame count roll back to what they were before that take's first encoded frame, so the next
///   take's first frame takes the slot the removed one's first frame had. The returned `Rollback`
///   is performed at once by the driver (cut the file back, drop what the encoders hold of it).
/// - Length cap (`Configuration.maxDuration`): the timeline stops the recording at the cap; the
///   first action after its stop resolved that way is `.lengthCapReached`.
/// - Every take undone and stopped: the recording finishes as `.nothingKept` (no file).
/// - Audio. Sample numbers count from the source's first chunk; a jump (samples lost) is filled
///   with silence in place and counted, an overlap is skipped, never duplicated. Audio delivered
///   but not yet decided may not exceed `audioBacklogLimit` frames: past it the recording fails
///   (video is not deciding the cuts). Audio alone and unpaced: its media position is the horizon.
/// - Takes. A take runs from the start or a resume to the next pause or stop, numbered from 1.
///   The first frame of a take given to the encoder is marked in its decision (`newTake`, at that
///   frame's pts: where the take starts in the output); without video, `.beginTake` comes before
///   the take's first kept samples, at the output sample they start on. A take that kept no frame
///   is not announced (its number is skipped).
/// - A source that fails is latched once: the recording stops at the horizon and, if the video
///   source's thread has exited, video has ended there (no frame will resolve the stop). The
///   recording ends as `.sourceFailed`: cut short, kept up to the failure.
/// - A file source that ends: the video's end (audio's, without video) stops the recording there;
///   a shorter audio is completed with silence, a longer one is cut at the stop.
/// - A failure (an encoder or write error, a failed sync, the audio backlog) ends the recording at
///   once: nothing more is decided or encoded; the driver finishes what the file holds.
/// - Meters. Status's audio peak is the largest |sample| kept over about the last second
///   (`PeakWindow`); dropped video frames are reported at most every 10 s (`DropReports`).
/// - After each event, in this order: pending audio is decided (keep, drop, silence) until the
///   timeline can decide no more; the source-failure latch; a status snapshot is published when
///   the last is `publishInterval` old (the first at once); stop completion: once the stop cut is
///   resolved the recording finishes when every kept sample has been emitted, or, when the audio
///   source has exited and the queue was empty at this wake, or `stopGrace` after the stop
///   resolved, the rest of the kept span is filled with silence and the recording finishes.
public struct SessionMachine: Sendable {
    public struct Configuration: Sendable {
        /// The video frame rate (nil: no video).
        public var videoFPS: Rational?
        /// The time base of the video encoder's pts.
        public var videoTimeBase: Rational
        public var audio: AudioFormat?
        /// Live sources on CLOCK_MONOTONIC (false: files and synthetic sources as fast as they go).
        public var paced: Bool
        /// Video not arriving for longer than this counts as stalled.
        public var stallLimit: Nanos = nanosPerSecond
        /// After the stop resolved, audio silent this long is completed with silence.
        public var stopGrace: Nanos = 2 * nanosPerSecond
        /// Status is published at most this often (and on every accepted request).
        public var publishInterval: Nanos = 100_000_000
        /// Frames of audio that may wait for video to decide the cuts (the pending FIFO's size).
        public var audioBacklogLimit: Int
        /// The length cap: kept output (ns, > 0) at which the recording stops by itself.
        public var maxDuration: Nanos?

        public init(videoFPS: Rational?, videoTimeBase: Rational = Rational(1, 90_000), audio: AudioFormat?, paced: Bool) {
            self.videoFPS = videoFPS
            self.videoTimeBase = videoTimeBase
            self.audio = audio
            self.paced = paced
            audioBacklogLimit = (audio?.sampleRate ?? 1) * 10
        }
    }

    /// Why a recording ended before its stop: it ends at once, nothing more is encoded.
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// More audio than the backlog limit waited for video to decide the cuts.
        case audioBacklog(seconds: Int)
        /// The file could not be written or synced: what the system said (the driver keeps what it can).
        case write(String)
        /// An encoder, converter or muxer error.
        case pipeline(String)

        public var description: String {
            switch self {
            case let .audioBacklog(s): return "audio backlog exceeded \(s) s waiting for video to decide the cuts (is the camera delivering?)"
            case let .write(m), let .pipeline(m): return m
            }
        }
    }

    /// How the pipeline ended.
    public enum Ending: Equatable, Sendable {
        /// The stop resolved and every kept sample was emitted.
        case complete
        /// A source failed (device gone): the recording was stopped there and finished.
        case sourceFailed(String)
        /// Ended at once; the file holds what was written before.
        case failed(Failure)
        /// Stopped with every take undone: nothing is kept, there is no file (remove the .part).
        case nothingKept
    }

    /// What an undo removed and what the driver cuts back, at once: the muxer's output and what
    /// the encoders hold. Media of the removed take still to come are dropped by later decisions.
    public struct Rollback: Equatable, Sendable {
        /// The removed take's number (the next take gets it) and label.
        public var take: Int
        public var label: String?
        /// Every video packet with this pts or later belonged to the removed take: it goes, from
        /// the file and from the encoder; nil when no frame of it was encoded (nothing to cut).
        public var videoPTS: Int64?
        /// Frames of it given to the encoder.
        public var framesRemoved: Int64
        /// The audio output is cut back to this many samples (per channel, from the start of the
        /// file); the samples after it (`samplesRemoved`, encoded or inside the encoder) go.
        public var audioSamples: Int64
        public var samplesRemoved: Int64
        /// The removed take's output start (ns), nil when its start cut was still pending.
        public var outputStart: Nanos?
    }

    public enum VideoDecision: Equatable, Sendable {
        /// Encode the frame with this pts (in `videoTimeBase`). `newTake`: this is the first frame of
        /// that take given to the encoder (its pts is where the take starts in the output).
        case encode(pts: Int64, newTake: Timeline.Take?)
        case drop
    }

    /// What to put in the pending FIFO for one delivered chunk, in this order: `silence` frames
    /// for samples the source lost (captured from `silenceTime`), then the chunk's frames from
    /// `skip` on, `frames` of them (captured from `time`).
    public struct AudioIntake: Equatable, Sendable {
        public var silence: Int
        public var silenceTime: Nanos
        public var skip: Int
        public var frames: Int
        public var time: Nanos
    }

    public enum Action: Equatable, Sendable {
        /// Without video: the samples of the next `encodeAudio`/`encodeSilence` begin this take, at
        /// output sample `start` (the kept samples emitted before them).
        case beginTake(Timeline.Take, start: Int64)
        /// With video: the samples of the next `encodeAudio`/`encodeSilence` are the take's first,
        /// at output sample `start` (the muxer cuts the take cleanly there; an undo goes back to it).
        case beginAudioTake(Timeline.Take, start: Int64)
        /// Encode the next `n` pending samples (per channel).
        case encodeAudio(Int)
        /// Discard the next `n` pending samples.
        case dropAudio(Int)
        /// Encode `n` samples of silence that the kept span needs before the source's first sample.
        case encodeSilence(Int)
        /// A source failed (the message names it): the recording is being stopped.
        case stopForSourceFailure(String)
        /// Publish a status snapshot (`progress`).
        case publish
        /// The audio source delivers nothing more: encode `n` samples of silence to complete the
        /// recorded span (n > 0 is worth a warning), then the recording finishes.
        case completeWithSilence(Int)
        /// The pipeline is done: finish the file. Nothing follows.
        case finish(Ending)
        /// The recording was stopped by the length cap (`maxDuration`, ns): say so (log, status).
        case lengthCapReached(Nanos)
    }

    /// What status shows of the recording; the driver adds what only it knows (bytes written,
    /// the audio peak, frames its sources dropped).
    public struct Progress: Equatable, Sendable {
        public var phase: Timeline.Phase
        public var stopping: Bool
        public var segmentDurations: [Nanos]
        public var recordedNs: Nanos
        public var frames: Int64
        /// Frames dropped here: capture time not increasing, or frame slot taken.
        public var droppedFrames: Int64
        public var audioSamples: Int64
        public var audioFilledSamples: Int64
        public var timestampFixes: Int
        public var sourceError: String?
        /// The kept takes (numbered, labelled, output start and duration) for status and chapters.
        public var takes: [Timeline.Take] = []
        /// Output time left before the cap (nil: no cap); true once the cap stopped the recording.
        public var remaining: Nanos? = nil
        public var capReached = false
        /// The capture instant of the output's time 0: its first frame's (without video, the start
        /// instant); after every take was undone, the next take's. nil until it is captured.
        public var origin: Nanos? = nil
    }

    public let configuration: Configuration
    public private(set) var timeline: Timeline
    var slots: FrameSlots?
    private var lastVideoPts = Int64.min
    var ptsFixes = 0
    var lastKeptOutput: Nanos?
    /// The take of the last frame given to the encoder (without video: of the last samples).
    private var lastTake: Int = 0
    /// With video: the take of the last samples given to the encoder.
    private var lastAudioTake: Int = 0
    /// An audio action held back while `.beginTake` goes first.
    private var heldAction: Action?
    /// Frames given to the encoder.
    public private(set) var framesEncoded: Int64 = 0
    /// Where the video track ends (pts in `videoTimeBase`) when the last take kept ends past its
    /// last frame's slot (a camera gap, or frames dropped, before its pause or stop): the last
    /// frame lasts until there. nil: the last frame's own duration ends it.
    public var videoEndPTS: Int64? { takeMarks.last?.endPTS }
    private var audioFirstSample: Int64?
    /// Source samples taken in (delivered, and lost ones filled with silence).
    private var audioReceived: Int64 = 0
    /// Source samples lost and filled with silence.
    public private(set) var audioFilled: Int64 = 0
    /// Frames in the pending FIFO (queued, not yet kept or dropped).
    public private(set) var audioPending = 0
    var sourceFailure: String?
    private var sourceFailureHandled = false
    private var failure: Failure?
    private var lastPublish: Nanos?
    private var stopResolvedAt: Nanos?
    private var capReported = false
    /// Per take with an encoded frame: what to restore when it is undone.
    private struct TakeMark: Sendable {
        var take: Int, slotBefore: Int64?, ptsBefore: Int64, outputBefore: Nanos?, firstPTS: Int64, frames: Int64
        /// Where the take's video ends when that is past its last frame's slot (`videoEndPTS`).
        var endPTS: Int64? = nil
    }
    private var takeMarks: [TakeMark] = []
    /// Status's audio peak and the journal's drop reports (see `PeakWindow`, `DropReports`).
    var peaks = PeakWindow()
    var drops = DropReports()
    private enum Stage { case drain, latch, publish, stop, finishing(Ending), waiting, ended }
    private var stage = Stage.drain
    /// True once `.finish` was returned: the driver's loop is over.
    public var isEnded: Bool { if case .ended = stage { return true }; return false }

    /// - Parameters:
    ///   - start: the instant recording starts (the start cut resolves on the next frame).
    ///   - schedule: requests at fixed times after `start` (one-shot recordings).
    ///   - label: the first take's label.
    public init(_ configuration: Configuration, start: Nanos, schedule: [(Timeline.Request, Nanos)] = [], label: String? = nil) {
        self.configuration = configuration
        timeline = Timeline(start: start, hasVideo: configuration.videoFPS != nil, audio: configuration.audio, label: label,
                            maxDuration: configuration.maxDuration)
        for (r, at) in schedule { _ = try? timeline.request(r, at: start + at) }
        slots = configuration.videoFPS.map { FrameSlots(fps: $0) }
    }

    // MARK: Events

    /// The driver woke at `now` (an item was taken from the queue, or the wait timed out);
    /// `lastVideoArrival` is when the capture side last handed over a frame.
    public mutating func wake(now: Nanos, lastVideoArrival: Nanos) {
        if case .ended = stage { return }
        stage = .drain
        guard configuration.paced else { return }
        timeline.advance(to: now)
        if configuration.videoFPS != nil, now - lastVideoArrival > configuration.stallLimit {
            let stopWasResolved = timeline.isStopResolved
            timeline.videoStalled(upTo: now - configuration.stallLimit)
            // A stop the camera's gap resolved at its instant: the take still ends on the grid.
            if !stopWasResolved, timeline.isStopResolved { endOnTheGrid(withoutFrame: true) }
        }
    }

    /// A pause, resume or stop, at the instant it was asked (nil: at the media position reached);
    /// `label` names the take a resume begins. Accepted: publish a snapshot, then answer.
    public mutating func request(_ r: Timeline.Request, at t: Nanos?, label: String? = nil) -> Result<Timeline.Phase, Timeline.RequestError> {
        do {
            // A stop stops now: requests a schedule placed later (a one-shot's) are dropped.
            if r == .stop { return .success(try timeline.stopBeforeLaterRequests(at: t ?? timeline.horizon)) }
            return .success(try timeline.request(r, at: t ?? timeline.horizon, label: label))
        } catch { return .failure(error) }
    }

    /// Undo the last take, at the instant it was asked (nil: at the media position reached);
    /// `expecting`: only if it is that take (see `Timeline.undo`).
    /// Accepted: perform the `Rollback` at once (before the next event), publish, then answer.
    public mutating func undo(at t: Nanos?, expecting: Int? = nil) -> Result<Rollback, Timeline.RequestError> {
        let u: Timeline.Undo
        do { u = try timeline.undo(at: t ?? timeline.horizon, expecting: expecting) } catch { return .failure(error) }
        var rb = Rollback(take: u.take, label: u.label, videoPTS: nil, framesRemoved: 0, audioSamples: u.audioOutput,
                          samplesRemoved: u.samplesRemoved, outputStart: u.outputStart)
        // Only the last take can be undone, so its mark (if any frame of it was encoded) is the last.
        if let mark = takeMarks.last, mark.take == u.take {
            takeMarks.removeLast()
            slots?.rollBack(to: mark.slotBefore)
            lastVideoPts = mark.ptsBefore
            lastKeptOutput = mark.outputBefore
            framesEncoded -= mark.frames
            rb.videoPTS = mark.firstPTS
            rb.framesRemoved = mark.frames
        }
        // Without video the next take is announced again under the removed take's number.
        lastTake = min(lastTake, u.take - 1)
        lastAudioTake = min(lastAudioTake, u.take - 1)
        return .success(rb)
    }

    /// A video frame captured at `time`.
    public mutating func video(at time: Nanos) -> VideoDecision {
        let stopWasResolved = timeline.isStopResolved
        let resolvedBefore = timeline.firstUnresolved
        let decision = timeline.video(at: time)
        if !stopWasResolved, timeline.isStopResolved { endOnTheGrid() }
        for k in resolvedBefore..<timeline.firstUnresolved { pauseOnTheGrid(k) }
        guard case let .keep(out) = decision, let fps = configuration.videoFPS else { return .drop }
        // The output frame slot nearest the capture time: a camera's timestamps jitter, so they
        // are snapped to the frame grid; a frame whose slot is taken is dropped (see FrameSlots).
        let before = TakeMark(take: timeline.lastKeptTake ?? 0, slotBefore: slots?.lastSlot, ptsBefore: lastVideoPts,
                              outputBefore: lastKeptOutput, firstPTS: 0, frames: 0)
        guard let slot = slots?.place(out) else { return .drop }
        let tb = configuration.videoTimeBase
        var pts = rescale(slot, tb.den * fps.den, fps.num * tb.num)
        if pts <= lastVideoPts { pts = lastVideoPts + 1; ptsFixes += 1 }
        lastVideoPts = pts
        lastKeptOutput = out
        framesEncoded += 1
        // The first frame of its take that reaches the encoder (a frame whose slot was taken does not).
        let newTake = markTake(before, pts: pts) ? timeline.videoTake : nil
        return .encode(pts: pts, newTake: newTake)
    }

    /// The frame just judged resolved the cut that ends the recording: the audio ends on the frame
    /// grid, at the slot that frame would take, or just after the last frame's slot when its
    /// jitter puts it in that one (a camera's timestamps jitter by milliseconds; under emulation a
    /// frame came 20 ms after the one before at 30 fps). At the frame's own capture time the
    /// audio would end up to a frame and a half before the video.
    ///
    /// `withoutFrame`: no frame resolved it (the camera's gap, a video source that failed): the
    /// take ends at the grid point at or after the stop's instant, audio to the sample, and the
    /// last frame lasts until there (`videoEndPTS`), so a gap just before a stop shortens neither track.
    private mutating func endOnTheGrid(withoutFrame: Bool = false) {
        guard let out = timeline.endOutput, let slots, let last = slots.lastSlot,
              let end = withoutFrame ? slots.end(atOrAfter: out) : slots.end(closedAt: out),
              let take = timeline.takes.last, takeMarks.last?.take == take.number else { return }
        timeline.endAudio(atOutput: end)
        markVideoEnd(end, lastSlot: last)
    }

    /// The last take's video lasts until output time `end` when its last frame (slot `lastSlot`)
    /// ends before it.
    private mutating func markVideoEnd(_ end: Nanos, lastSlot last: Int64) {
        guard let fps = slots?.fps, !takeMarks.isEmpty else { return }
        let tb = configuration.videoTimeBase
        let lastEnd = rescale(last + 1, tb.den * fps.den, fps.num * tb.num)
        let endPTS = rescale(end, tb.den, nanosPerSecond * tb.num)
        takeMarks[takeMarks.count - 1].endPTS = endPTS > lastEnd ? endPTS : nil
    }

    /// Cut `k`, just resolved by a frame, is a pause: the take's audio ends on the frame grid,
    /// where that frame's slot begins (after the last frame's), as a stop's does (`endOnTheGrid`).
    /// Only when the take encoded a frame.
    private mutating func pauseOnTheGrid(_ k: Int) {
        let cuts = timeline.cuts
        guard k >= 1, !cuts[k].keepAfter, !cuts[k].isStop, let at = cuts[k].at, let origin = timeline.origin,
              takeMarks.last?.take == (k - 1) / 2 + 1 else { return }
        let out = at - origin - cuts[k - 1].offsetNanos
        guard let end = slots?.end(closedAt: out), let last = slots?.lastSlot else { return }
        timeline.endAudio(ofPause: k, atOutput: end)
        markVideoEnd(end, lastSlot: last)
    }

    /// Counts an encoded frame in its take, remembering at its first what an undo restores.
    /// True when the frame is its take's first.
    private mutating func markTake(_ before: TakeMark, pts: Int64) -> Bool {
        if takeMarks.last?.take == before.take { takeMarks[takeMarks.count - 1].frames += 1; return false }
        var m = before
        m.firstPTS = pts
        m.frames = 1
        takeMarks.append(m)
        return true
    }

    /// A chunk of `frames` audio frames whose first is source sample `sample`, captured at `time`.
    public mutating func audio(frames: Int, sample: Int64, time: Nanos) -> AudioIntake {
        if audioFirstSample == nil { audioFirstSample = sample }
        let rel = sample - audioFirstSample!
        let gap = Int(max(0, rel - audioReceived))  // samples the source lost
        audioReceived += Int64(gap); audioFilled += Int64(gap)
        let skip = Int(min(Int64(frames), max(0, audioReceived - rel)))  // overlap: never expected
        let kept = frames - skip
        audioReceived += Int64(kept)
        let fmt = configuration.audio!
        if kept > 0, configuration.videoFPS == nil, !configuration.paced {
            timeline.advance(to: time + fmt.sampleTime(Int64(frames)))
        }
        return AudioIntake(silence: gap, silenceTime: time, skip: skip, frames: kept, time: time + fmt.sampleTime(Int64(skip)))
    }

    /// `frames` frames are about to go into the pending FIFO (after resampling, if any), the first
    /// at `captureTime`. Throws, and ends the recording, when they would exceed the backlog.
    public mutating func audioQueued(frames: Int, captureTime: Nanos) throws(Failure) {
        guard audioPending + frames <= configuration.audioBacklogLimit else {
            throw fail(.audioBacklog(seconds: configuration.audioBacklogLimit / (configuration.audio?.sampleRate ?? 1)))
        }
        audioPending += frames
        timeline.audioArrived(count: frames, captureTime: captureTime)
    }

    /// A source failed and stopped (device gone, read error); `message` names it.
    public mutating func sourceFailed(_ message: String) {
        sourceFailure = message
    }

    /// A file source has nothing more: its media ends at `at`. Returns whether that ends the
    /// recording (the video's end, or the audio's without video); a shorter audio does not.
    public mutating func sourceEnded(at: Nanos, isVideo: Bool) -> Bool {
        guard isVideo || configuration.videoFPS == nil else { return false }
        if timeline.phase != .stopped { _ = try? timeline.request(.stop, at: at) }
        if isVideo { timeline.videoEnded(at: at) } else { timeline.advance(to: at) }
        return true
    }

    /// Performing an action failed: the recording ends at once. The first failure is the one
    /// reported. Returns it.
    @discardableResult
    public mutating func fail(_ f: Failure) -> Failure {
        if failure == nil { failure = f }
        return failure!
    }

    /// The next thing to do after an event; nil when nothing more until the next wake. `now` is the
    /// driver's clock after the event; `queueWasEmpty`: the wake found no event;
    /// `sourceExited(video)`: whether that source's capture thread has exited (asked only when needed).
    public mutating func nextAction(now: Nanos, queueWasEmpty: Bool, sourceExited: (_ video: Bool) -> Bool) -> Action? {
        if let failure, !isEnded { stage = .ended; return .finish(.failed(failure)) }
        while true {
            switch stage {
            case .drain:
                if let held = heldAction { heldAction = nil; return held }
                if let a = timeline.nextAudioAction() {
                    let action: Action, kept: Int
                    switch a {
                    case let .keep(n): audioPending -= n; action = .encodeAudio(n); kept = n
                    case let .drop(n): audioPending -= n; return .dropAudio(n)
                    case let .silence(n): action = .encodeSilence(n); kept = n
                    }
                    // Without video a take begins on its first kept sample (or owed silence); with
                    // video that is where the take's audio begins.
                    if let take = timeline.audioTake, take.number > (configuration.videoFPS == nil ? lastTake : lastAudioTake) {
                        heldAction = action
                        let start = timeline.audioOutput - Int64(kept)
                        if configuration.videoFPS == nil { lastTake = take.number; return .beginTake(take, start: start) }
                        lastAudioTake = take.number
                        return .beginAudioTake(take, start: start)
                    }
                    return action
                }
                stage = .latch
            case .latch:
                stage = .publish
                if timeline.capReached, !capReported, let cap = configuration.maxDuration {
                    capReported = true
                    stage = .latch
                    return .lengthCapReached(cap)
                }
                if let msg = sourceFailure, !sourceFailureHandled {
                    sourceFailureHandled = true
                    if timeline.phase != .stopped { _ = try? timeline.request(.stop, at: timeline.horizon) }
                    // A video source that failed delivers no frame to resolve cuts on.
                    if configuration.videoFPS != nil, sourceExited(true) {
                        let stopWasResolved = timeline.isStopResolved
                        timeline.videoEnded(at: timeline.horizon)
                        if !stopWasResolved, timeline.isStopResolved { endOnTheGrid(withoutFrame: true) }
                    }
                    return .stopForSourceFailure(msg)
                }
            case .publish:
                stage = .stop
                if lastPublish.map({ now - $0 >= configuration.publishInterval }) ?? true {
                    lastPublish = now
                    return .publish
                }
            case .stop:
                guard timeline.isStopResolved else { stage = .waiting; return nil }
                if stopResolvedAt == nil { stopResolvedAt = now }
                let ending: Ending = timeline.keepsNothing ? .nothingKept : sourceFailure.map { .sourceFailed($0) } ?? .complete
                if timeline.isFinished { stage = .ended; return .finish(ending) }
                let audioDone = queueWasEmpty && (configuration.audio == nil || sourceExited(false))
                guard audioDone || now - stopResolvedAt! > configuration.stopGrace else { stage = .waiting; return nil }
                stage = .finishing(ending)
                return .completeWithSilence(timeline.silenceToFinish())
            case let .finishing(ending):
                stage = .ended
                return .finish(ending)
            case .waiting, .ended:
                return nil
            }
        }
    }
}
