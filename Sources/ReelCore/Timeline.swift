/// The recording timeline: where pauses cut the raw streams and how the kept spans are
/// re-timed into one continuous output. A pure value-type state machine: the pipeline feeds it
/// capture timestamps and requests, and performs the decisions it returns. No I/O, no clock.
///
/// The rules (see docs/ARCHITECTURE.md):
/// - Every request (start, pause, resume, stop) carries an instant on the media clock. It is
///   *resolved* on the video frame grid: the cut is the capture time of the first video frame at
///   or after the request (the first dropped frame of a pause, the first kept frame of a resume).
///   Without video, or when video stops arriving (`videoStalled`), the cut is the request instant
///   itself.
/// - Audio is cut at exactly those instants, to the sample: the cut sample for instant `X` is
///   `aS + round((X - S) * rate)` where `S` is the start cut and `aS` the sample at `S`.
/// - Each pause's length in samples (resume cut sample - pause cut sample) is added to an
///   accumulated offset, subtracted from every later timestamp: audio output is simply the
///   running count of kept samples; video output time is `ts - S - offset / rate`.
///   Hence video keeps its frame grid across a resume and audio has no gap and no overlap.
/// - A frame or chunk is judged by its capture time / sample index, never by its arrival:
///   audio is held (not dropped) until every cut that could affect it is resolved.
public struct Timeline: Sendable {
    public enum Request: String, Sendable, CustomStringConvertible {
        case pause, resume, stop
        public var description: String { rawValue }
    }

    /// The phase the requests so far put the recording in (cuts may still be pending).
    public enum Phase: String, Sendable { case recording, paused, stopped }

    public enum RequestError: Error, Equatable, CustomStringConvertible {
        case wrongPhase(request: Request, phase: Phase)
        public var description: String {
            switch self {
            case let .wrongPhase(request, phase):
                switch (request, phase) {
                case (.pause, .paused): return "cannot pause: already paused (use 'reelctl resume')"
                case (.resume, .recording): return "cannot resume: not paused (use 'reelctl pause' first)"
                case (_, .stopped): return "cannot \(request): the recording is stopping"
                default: return "cannot \(request) while \(phase.rawValue)"
                }
            }
        }
    }

    public enum VideoDecision: Equatable, Sendable {
        /// Encode the frame at this output time (ns from the start of the output).
        case keep(outputTime: Nanos)
        case drop
    }

    /// What to do with the head of the pipeline's pending-audio FIFO.
    public enum AudioAction: Equatable, Sendable {
        /// Encode the next `n` pending samples (per channel).
        case keep(Int)
        /// Discard the next `n` pending samples.
        case drop(Int)
        /// Encode `n` samples of silence (pending samples are untouched): audio that the
        /// recorded span needs but the source never delivered (it started late, or stalled).
        case silence(Int)
    }

    /// A take: the span from a start or resume to the next pause or stop. Numbered from 1 in the
    /// order the user started them (a take that kept no frame keeps its number; see `videoTake`).
    public struct Take: Equatable, Sendable {
        public var index: Int
        /// The label given with `start`/`resume` (nil: none; the chapter is then titled "Take N").
        public var label: String?
        public init(index: Int, label: String? = nil) { self.index = index; self.label = label }
    }

    /// One resolved or pending cut.
    struct Cut: Sendable {
        var keepAfter: Bool        // state after the cut: recording (true) or paused/stopped
        var take: Take? = nil      // for keep cuts: the take it begins
        var isStop: Bool
        var requested: Nanos
        var at: Nanos?             // resolved cut instant on the media clock
        var rel: Int64 = 0         // audio: cut sample relative to the start cut (round((at - S) * rate))
        var offsetSamples: Int64 = 0  // for keep cuts: accumulated pause length in samples before this segment
        var offsetNanos: Nanos = 0    // for keep cuts: the same in ns (exact sum when there is no audio)
    }

    public let hasVideo: Bool
    public let audio: AudioFormat?

    var cuts: [Cut]
    var firstUnresolved = 0
    public private(set) var phase: Phase = .recording
    /// No future request can be earlier than this instant.
    public private(set) var horizon: Nanos

    // Video state.
    var videoCursor = 0            // number of resolved cuts at or before the last judged frame
    var lastVideoTime: Nanos?
    var lastVideoOutput: Nanos?
    /// Frames whose capture time did not increase (dropped, counted).
    public private(set) var videoNonMonotonic = 0
    /// Output times forced up to stay strictly increasing (counted; should stay 0).
    public private(set) var videoOutputFixes = 0
    /// The take of the last frame judged `.keep` (nil before the first).
    public private(set) var videoTake: Take?

    // Audio state. Sample index 0 is the first sample the source delivered, at `anchor`.
    var anchor: Nanos?
    /// End (exclusive) of the samples delivered so far.
    public private(set) var audioReceived: Int64 = 0
    /// Position of the next undecided sample; negative while owing silence before the source began.
    var audioPos: Int64?
    var audioCursor = 0
    /// Samples emitted to the encoder (kept + silence): the output audio length.
    public private(set) var audioOutput: Int64 = 0
    public private(set) var audioSilence: Int64 = 0
    /// The take of the last samples `nextAudioAction` kept (`.keep` or `.silence`; nil before the first).
    public private(set) var audioTake: Take?
    /// Set once the remaining audio was filled with silence; nothing more is decided.
    var audioClosed = false

    /// - Parameters:
    ///   - start: the instant recording was requested; the start cut resolves like any other.
    ///   - hasVideo: whether a video stream exists (it defines the cut grid).
    ///   - audio: the audio stream's format, if any (it defines the offset unit).
    ///   - label: the first take's label (nil: none).
    public init(start: Nanos, hasVideo: Bool, audio: AudioFormat?, label: String? = nil) {
        precondition(hasVideo || audio != nil, "a timeline needs at least one stream")
        self.hasVideo = hasVideo
        self.audio = audio
        self.horizon = start
        self.cuts = [Cut(keepAfter: true, take: Take(index: 1, label: label), isStop: false, requested: start)]
        if !hasVideo { resolvePending(upTo: start, at: nil) }
    }

    // MARK: Requests

    /// Asks for a pause, resume or stop at instant `t` (clamped so it never precedes anything
    /// already decided). `label` names the take a resume begins (ignored otherwise). Returns the
    /// phase after the request.
    @discardableResult
    public mutating func request(_ r: Request, at t: Nanos, label: String? = nil) throws(RequestError) -> Phase {
        switch (r, phase) {
        case (.pause, .recording): phase = .paused
        case (.resume, .paused): phase = .recording
        case (.stop, .recording), (.stop, .paused): break
        default: throw .wrongPhase(request: r, phase: phase)
        }
        // Never before anything already decided, never before the previous request. A request may
        // lie in the future (a schedule, or the end of a file): it waits, pending, for its frame.
        let instant = max(t, horizon, cuts[cuts.count - 1].requested)
        switch r {
        case .pause: cuts.append(Cut(keepAfter: false, isStop: false, requested: instant))
        case .resume:
            let takes = cuts.reduce(0) { $0 + ($1.keepAfter ? 1 : 0) }
            cuts.append(Cut(keepAfter: true, take: Take(index: takes + 1, label: label), isStop: false, requested: instant))
        case .stop:
            // Stopping while paused adds no cut: the last segment is already closed.
            if phase == .recording { cuts.append(Cut(keepAfter: false, isStop: true, requested: instant)) }
            else { cuts[cuts.count - 1].isStop = true }
            phase = .stopped
        }
        if !hasVideo { resolvePending(upTo: instant, at: nil) }
        return phase
    }

    /// The video stream has ended at `t` (just past its last frame): no frame will ever resolve a
    /// pending cut, so each resolves at `t` (a cut scheduled later than the end lands on it).
    public mutating func videoEnded(at t: Nanos) {
        horizon = max(horizon, t)
        while firstUnresolved < cuts.count { resolve(firstUnresolved, at: t) }
    }

    /// Tells the timeline that no request will ever come earlier than `t` (the pipeline passes
    /// CLOCK_MONOTONIC now in paced mode).
    public mutating func advance(to t: Nanos) {
        horizon = max(horizon, t)
    }

    /// Video has stopped *arriving* (a camera that hangs without an error): pending cuts requested
    /// at or before `t` resolve at their request instants instead of waiting for a frame. The
    /// caller decides on arrivals, never on how far behind its own processing is: frames waiting
    /// in a queue still resolve cuts on the frame grid.
    public mutating func videoStalled(upTo t: Nanos) {
        horizon = max(horizon, t)
        while firstUnresolved < cuts.count, cuts[firstUnresolved].requested <= t {
            resolve(firstUnresolved, at: cuts[firstUnresolved].requested)
        }
    }

    // MARK: Video

    /// Judges one video frame by its capture time. Frames must be offered in capture order.
    public mutating func video(at ts: Nanos) -> VideoDecision {
        if let last = lastVideoTime, ts <= last { videoNonMonotonic += 1; return .drop }
        lastVideoTime = ts
        horizon = max(horizon, ts)
        resolvePending(upTo: ts, at: ts)
        while videoCursor < firstUnresolved, let at = cuts[videoCursor].at, at <= ts { videoCursor += 1 }
        guard videoCursor > 0, cuts[videoCursor - 1].keepAfter else { return .drop }
        let seg = cuts[videoCursor - 1]
        var out = ts - startInstant! - seg.offsetNanos
        if let prev = lastVideoOutput, out <= prev { out = prev + 1; videoOutputFixes += 1 }
        lastVideoOutput = out
        videoTake = seg.take
        return .keep(outputTime: out)
    }

    // MARK: Audio

    /// Records that the source delivered `count` more samples (per channel). The first chunk
    /// anchors sample 0 at `captureTime`; later chunks are assumed contiguous (a source fills
    /// what it lost with silence), so the audio timeline is the sample count.
    public mutating func audioArrived(count: Int, captureTime: Nanos) {
        precondition(audio != nil && count >= 0)
        if anchor == nil { anchor = captureTime }
        audioReceived += Int64(count)
    }

    /// The next thing to do with pending audio, or nil when nothing more can be decided yet.
    /// The pipeline performs it and asks again until nil.
    public mutating func nextAudioAction() -> AudioAction? {
        guard let fmt = audio, let anchor, let s = startInstant, !audioClosed else { return nil }
        let aS = fmt.sampleIndex(at: s - anchor)
        // Decidable up to the earliest sample a pending or future cut could land on.
        var cutLimit = Int64.max
        if firstUnresolved < cuts.count {
            cutLimit = aS + fmt.sampleIndex(at: cuts[firstUnresolved].requested - s)
        } else if phase != .stopped {
            cutLimit = aS + fmt.sampleIndex(at: horizon - s)
        }
        var pos = audioPos ?? min(aS, 0)
        while true {
            while audioCursor < firstUnresolved, aS + cuts[audioCursor].rel <= pos { audioCursor += 1 }
            let kept = audioCursor > 0 && cuts[audioCursor - 1].keepAfter
            let nextCut = audioCursor < firstUnresolved ? aS + cuts[audioCursor].rel : Int64.max
            // Negative positions precede the source's first sample: owed silence if kept.
            let end = min(nextCut, cutLimit, pos < 0 ? 0 : audioReceived)
            guard end > pos else { audioPos = pos; return nil }
            let n = end - pos
            pos = end
            audioPos = pos
            if pos <= 0 {
                guard kept else { continue }
                audioOutput += n; audioSilence += n
                audioTake = cuts[audioCursor - 1].take
                return .silence(Int(n))
            }
            if kept { audioOutput += n; audioTake = cuts[audioCursor - 1].take; return .keep(Int(n)) }
            return .drop(Int(n))
        }
    }

    /// For a source that stopped delivering: the silence that completes the recorded span.
    /// Only valid once every cut is resolved (after a stop).
    public mutating func silenceToFinish() -> Int {
        guard let fmt = audio, let s = startInstant, isStopResolved else { return 0 }
        let aS = anchor.map { fmt.sampleIndex(at: s - $0) } ?? 0
        let endSample = aS + finalCut.rel
        let kept = keptSamples(from: audioPos ?? aS, to: endSample, aS: aS)
        audioPos = max(audioPos ?? aS, endSample)
        audioCursor = firstUnresolved
        audioClosed = true
        audioOutput += kept; audioSilence += kept
        return Int(kept)
    }

    // MARK: State

    public var startInstant: Nanos? { cuts[0].at }

    /// True once the stop cut is resolved and every kept sample has been emitted.
    public var isFinished: Bool {
        guard isStopResolved else { return false }
        guard let fmt = audio, !audioClosed else { return true }
        guard let anchor, let s = startInstant else { return false }
        return (audioPos ?? Int64.min) >= fmt.sampleIndex(at: s - anchor) + finalCut.rel
    }

    public var isStopResolved: Bool { phase == .stopped && firstUnresolved == cuts.count }

    /// Samples (per channel) the audio source must have delivered for the recording to finish;
    /// nil until the stop is resolved and audio is anchored.
    public var audioNeededForFinish: Int64? {
        guard let fmt = audio, let anchor, let s = startInstant, isStopResolved else { return nil }
        return fmt.sampleIndex(at: s - anchor) + finalCut.rel
    }

    /// The recorded segments as resolved cut instants on the media clock (end nil while open).
    public var segments: [(begin: Nanos, end: Nanos?)] {
        var out: [(Nanos, Nanos?)] = []
        for i in 0..<firstUnresolved where cuts[i].keepAfter {
            let end = i + 1 < firstUnresolved ? cuts[i + 1].at : nil
            out.append((cuts[i].at!, end))
        }
        return out
    }

    /// Total pause length so far (ns), as subtracted from video timestamps.
    public var currentOffset: Nanos {
        var i = firstUnresolved - 1
        while i >= 0 && !cuts[i].keepAfter { i -= 1 }
        return i >= 0 ? cuts[i].offsetNanos : 0
    }

    // MARK: Internals

    /// The cut that closes the last segment: the stop, or the pause a stop-while-paused marked.
    /// (Cuts alternate keep/drop, and a stop while paused adds no cut.)
    private var finalCut: Cut { cuts[cuts.count - 1] }

    private mutating func resolvePending(upTo t: Nanos, at instant: Nanos?) {
        while firstUnresolved < cuts.count, cuts[firstUnresolved].requested <= t {
            resolve(firstUnresolved, at: instant ?? cuts[firstUnresolved].requested)
        }
    }

    private mutating func resolve(_ i: Int, at instant: Nanos) {
        precondition(i == firstUnresolved)
        let at = i > 0 ? max(instant, cuts[i - 1].at!) : instant
        cuts[i].at = at
        if i > 0, let fmt = audio { cuts[i].rel = fmt.sampleIndex(at: at - cuts[0].at!) }
        if cuts[i].keepAfter, i > 0 {
            // A resume: the pause it ends is cuts[i-1]; its length joins the offset.
            // Cuts alternate keep / drop, so cuts[i-1] is the pause and cuts[i-2] the segment before.
            let pause = cuts[i - 1]
            let base = cuts[i - 2]
            if let fmt = audio {
                cuts[i].offsetSamples = base.offsetSamples + (cuts[i].rel - pause.rel)
                cuts[i].offsetNanos = rescale(cuts[i].offsetSamples, nanosPerSecond, Int64(fmt.sampleRate))
            } else {
                cuts[i].offsetNanos = base.offsetNanos + (at - pause.at!)
            }
        }
        firstUnresolved += 1
    }

    /// Kept samples in [from, to) given the resolved cuts.
    private func keptSamples(from: Int64, to: Int64, aS: Int64) -> Int64 {
        var total: Int64 = 0
        for i in 0..<firstUnresolved where cuts[i].keepAfter {
            let b = aS + cuts[i].rel
            let e = i + 1 < firstUnresolved ? aS + cuts[i + 1].rel : to
            total += max(0, min(e, to) - max(b, from))
        }
        return total
    }
}
