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
///   `aS + round((X - S) * rate)` where `S` is the start cut (the origin for the whole
///   recording, even when every take was undone) and `aS` the sample at `S`. The one exception
///   is a stop's cut, which the caller may move to an output time of its choosing (`endAudio`:
///   where the video's last frame slot ends) within what is still undecided.
/// - Each pause's length in samples (resume cut sample - pause cut sample) is added to an
///   accumulated offset, subtracted from every later timestamp: audio output is simply the
///   running count of kept samples; video output time is `ts - S - offset / rate`.
///   Hence video keeps its frame grid across a resume and audio has no gap and no overlap.
/// - A frame or chunk is judged by its capture time / sample index, never by its arrival:
///   audio is held (not dropped) until every cut that could affect it is resolved.
/// - Takes. A take is a kept span: from a start or resume cut to the pause or stop that ends it.
///   Takes are numbered 1, 2, ... by their place in the output; only the last take can be undone,
///   so a kept take's number never changes and an undone take's number goes to the next take.
///   A start or resume may carry a label (the chapter title; "Take N" without one).
/// - Undo (`undo(at:)`, while recording or paused) removes the last take: while recording it is
///   ended at the request instant; either way the timeline is paused after it. The removed span
///   counts as pause: every frame and sample captured in it (kept already, held, or arriving
///   later) is out of the output, and the next resume continues right after the kept takes,
///   exactly as if the removed take's resume had never come (same offset rule, so video keeps
///   its grid and steps by one frame across the join, audio has no gap and no overlap). The
///   returned `Undo` says where the output rolls back to. With every take undone the next resume
///   starts the output again at sample 0 and video output time 0 (within half a sample: the
///   offset stays a sample count); a stop with no take keeps nothing (`keepsNothing`: no file).
///   With a cap, an undo of a take whose start cut is still pending is settled when it resolves
///   (see `undo`).
/// - Length cap (`maxDuration`, output ns): a take that would carry the kept output past the cap
///   is stopped as if `stop` had come at the capture instant `X` where its output reaches the cap
///   (`X = S + offset + cap`): video to the frame (the stop cut is the first frame at or after
///   `X`, so no frame with output time >= cap is kept), audio to the sample (the cut sample is
///   set so that exactly `round(cap * rate)` samples are kept in all). The cap's stop is issued
///   as soon as no request can come before `X` (the horizon passed it, or the next pending
///   request lies at or after it, which it replaces; requests after it are void). A pause asked
///   before `X` whose cut lands at or past it ends the take at the cap the same way but leaves the
///   recording paused with no time left: a resume then stops at once, an undo gives the time
///   back (as any undo does). `capReached` says the recording stopped with the output at the
///   cap; `remaining` is the time left.
public struct Timeline: Sendable {
    public enum Request: String, Sendable, CustomStringConvertible {
        case pause, resume, stop
        public var description: String { rawValue }
    }

    /// The phase the requests so far put the recording in (cuts may still be pending).
    public enum Phase: String, Sendable { case recording, paused, stopped }

    public enum RequestError: Error, Equatable, CustomStringConvertible {
        case wrongPhase(request: Request, phase: Phase)
        /// Undo refused: stopping (`.stopped`), or paused with no take left (`.paused`).
        case cannotUndo(phase: Phase)
        /// Undo refused: the previous undo waits for its take's first frame (see `undo`).
        case undoPending
        /// Undo refused: the caller expected to remove take `expected`, the last take is `last`.
        case wrongTake(expected: Int, last: Int)
        public var description: String {
            switch self {
            case let .wrongTake(expected, last):
                return "cannot undo take \(expected): the last take is take \(last) (take \(expected) was removed already or is not the last; see 'reelctl takes', then undo with --take \(last) if that is the one to remove)"
            case .undoPending: return "cannot undo: the last undo is not settled yet (its take's first frame is still on its way); try again"
            case .cannotUndo(.stopped): return "cannot undo: the recording is stopping"
            case .cannotUndo: return "cannot undo: no take left to remove (use 'reelctl stop' to end, or 'reelctl resume' to record)"
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

    /// A kept span, as `takes` lists it.
    public struct Take: Equatable, Sendable {
        /// 1-based place in the output (an undone take's number goes to the next take).
        public var number: Int
        /// Set by the start or resume that began it.
        public var label: String?
        /// Output time (ns) of its start: the output time of its first frame.
        public var outputStart: Nanos
        /// Output length (ns); nil while it is open (recording, or its end cut still pending).
        /// A take stopped by the cap ends exactly at the cap.
        public var duration: Nanos?
        /// The chapter title: the label, or "Take N".
        public var title: String { label ?? "Take \(number)" }
    }

    /// What an undo removed and where the output rolls back to. The pipeline cuts its output back
    /// to exactly this and drops what its encoders hold beyond it; media of the removed span still
    /// to come are dropped by later decisions.
    public struct Undo: Equatable, Sendable {
        /// The removed take's number (the next take gets it).
        public var take: Int
        public var label: String?
        /// The output time (ns) the removed take began at (its first frame's output time), nil
        /// when its start cut was still pending: nothing of it was output.
        public var outputStart: Nanos?
        /// Output time of the first frame kept from it (every kept frame at or after it goes);
        /// nil when no frame of it was kept.
        public var videoOutputFrom: Nanos?
        /// Frames of it that `video` had kept.
        public var framesRemoved: Int
        /// The audio output is cut back to this many samples (per channel).
        public var audioOutput: Int64
        /// Samples of it already emitted (kept or silence), now removed.
        public var samplesRemoved: Int64
    }

    /// One resolved or pending cut.
    struct Cut: Sendable {
        var keepAfter: Bool        // state after the cut: recording (true) or paused/stopped
        var isStop: Bool           // a stop asked while recording, or the cap's (a stop while paused adds no cut)
        var requested: Nanos
        var at: Nanos?             // resolved cut instant on the media clock
        var rel: Int64 = 0         // audio: cut sample relative to the origin (round((at - S) * rate))
        var offsetSamples: Int64 = 0  // for keep cuts: accumulated pause length in samples before this segment
        var offsetNanos: Nanos = 0    // for keep cuts: the same in ns (exact sum when there is no audio)
        var label: String? = nil   // keep cuts: the take's label
        var capAt: Nanos? = nil    // keep cuts, with a cap: capture instant X where the output reaches it
        var capRel: Int64? = nil   // keep cuts, with a cap and audio: the cut sample (rel) at the cap
        var isCapStop = false      // the stop the cap issued
        var isUndo = false         // ends a take whose start was pending at its undo: removes it when that resolves
        var capHit = false         // a resolved end cut clamped to the cap
        var framesKept = 0         // keep cuts: frames `video` kept in this take
        var firstVideoOutput: Nanos? = nil   // keep cuts: output time of the first of them
        var videoOutputBefore: Nanos? = nil  // keep cuts: the last kept output before it
    }

    public let hasVideo: Bool
    public let audio: AudioFormat?
    /// The length cap: kept output (ns) at which the recording stops by itself.
    public let maxDuration: Nanos?

    // The state. What is `public internal(set)` is set by the extensions in Timeline+*.swift too.
    var cuts: [Cut]
    var firstUnresolved = 0
    public internal(set) var phase: Phase = .recording
    /// No future request can be earlier than this instant.
    public internal(set) var horizon: Nanos
    /// The latest request instant (no request is placed before it).
    var lastRequested: Nanos
    /// The instant of the stop placed (asked, scheduled, or the cap's), nil while none is.
    var stopRequested: Nanos?
    /// The origin `S`: the start cut's instant, the base of every offset and cut sample for the
    /// whole recording. It resolves like the start cut, even when that take was undone before
    /// its frame came (decisions never depend on arrival).
    var origin: Nanos?
    let originRequested: Nanos
    /// The take the last kept frame belongs to.
    public internal(set) var lastKeptTake: Int?
    /// The take of the last frame judged `.keep` (nil before the first, or once an undo removed
    /// every take that kept one): its number and label, read from `lastKeptTake`'s keep cut (take
    /// n begins at cut 2(n-1)), so an undo that moves `lastKeptTake` back moves it too.
    public var videoTake: Take? { lastKeptTake.map { begun(2 * ($0 - 1)) } }
    /// The take of the last samples `nextAudioAction` kept (`.keep` or `.silence`; nil before the first).
    public internal(set) var audioTake: Take?

    // Video state.
    var videoCursor = 0            // number of resolved cuts at or before the last judged frame
    var lastVideoTime: Nanos?
    var lastVideoOutput: Nanos?
    /// Frames whose capture time did not increase (dropped, counted).
    public private(set) var videoNonMonotonic = 0
    /// Output times forced up to stay strictly increasing (counted; should stay 0).
    public private(set) var videoOutputFixes = 0

    // Audio state. Sample index 0 is the first sample the source delivered, at `anchor`.
    var anchor: Nanos?
    /// End (exclusive) of the samples delivered so far.
    public internal(set) var audioReceived: Int64 = 0
    /// Position of the next undecided sample; negative while owing silence before the source began.
    var audioPos: Int64?
    var audioCursor = 0
    /// Samples emitted to the encoder (kept + silence): the output audio length.
    public internal(set) var audioOutput: Int64 = 0
    /// Set once the remaining audio was filled with silence; nothing more is decided.
    var audioClosed = false

    /// - Parameters:
    ///   - start: the instant recording was requested; the start cut resolves like any other.
    ///   - hasVideo: whether a video stream exists (it defines the cut grid).
    ///   - audio: the audio stream's format, if any (it defines the offset unit).
    ///   - label: the first take's label.
    ///   - maxDuration: the length cap (output ns, > 0), if any.
    public init(start: Nanos, hasVideo: Bool, audio: AudioFormat?, label: String? = nil, maxDuration: Nanos? = nil) {
        precondition(hasVideo || audio != nil, "a timeline needs at least one stream")
        precondition((maxDuration ?? 1) > 0, "maxDuration must be positive")
        self.hasVideo = hasVideo
        self.audio = audio
        self.maxDuration = maxDuration
        self.horizon = start
        self.lastRequested = start
        self.originRequested = start
        self.cuts = [Cut(keepAfter: true, isStop: false, requested: start, label: label)]
        if !hasVideo { resolveAtRequests(upTo: start) }
    }

    // MARK: Video

    /// Judges one video frame by its capture time. Frames must be offered in capture order.
    public mutating func video(at ts: Nanos) -> VideoDecision {
        if let last = lastVideoTime, ts <= last { videoNonMonotonic += 1; return .drop }
        lastVideoTime = ts
        horizon = max(horizon, ts)
        if origin == nil, originRequested <= ts { origin = ts }
        resolvePending(upTo: ts, at: ts)
        issueCap { tl in tl.resolvePending(upTo: ts, at: ts) }
        while videoCursor < firstUnresolved, let at = cuts[videoCursor].at, at <= ts { videoCursor += 1 }
        guard videoCursor > 0, cuts[videoCursor - 1].keepAfter else { return .drop }
        let i = videoCursor - 1
        var out = ts - origin! - cuts[i].offsetNanos
        if let prev = lastVideoOutput, out <= prev { out = prev + 1; videoOutputFixes += 1 }
        if cuts[i].framesKept == 0 { cuts[i].firstVideoOutput = out; cuts[i].videoOutputBefore = lastVideoOutput }
        cuts[i].framesKept += 1
        lastVideoOutput = out
        lastKeptTake = i / 2 + 1
        return .keep(outputTime: out)
    }

    // MARK: State

    /// The first take's start cut (after every take was undone: the next one's), nil while pending.
    public var startInstant: Nanos? { cuts.first?.at }

    /// True once the stop cut is resolved and every kept sample has been emitted.
    public var isFinished: Bool {
        guard isStopResolved else { return false }
        guard let fmt = audio, !audioClosed, !cuts.isEmpty else { return true }
        guard let anchor, origin != nil else { return false }
        return (audioPos ?? Int64.min) >= startSample(fmt, anchor) + finalCut.rel
    }

    public var isStopResolved: Bool { phase == .stopped && firstUnresolved == cuts.count }

    /// The output time (ns) of the stop cut that ended the last take, once it is resolved; nil
    /// before, after a stop while paused (the pause ended the take), and when the cap stopped the
    /// take (exact already).
    public var endOutput: Nanos? {
        guard isStopResolved, cuts.count >= 2, finalCut.isStop, !finalCut.isCapStop, !finalCut.capHit else { return nil }
        let k = cuts.count - 2  // the last take's keep cut (cuts alternate keep / drop)
        return finalCut.at! - origin! - cuts[k].offsetNanos
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

    /// True once the recording has stopped with its output at the cap (the cap's own stop, or a
    /// stop or pause whose cut reached it).
    public var capReached: Bool { isStopResolved && cuts.last?.capHit == true }

    /// The recording stopped with no take: nothing is kept, there is no file to make.
    public var keepsNothing: Bool { isStopResolved && cuts.isEmpty }

    /// The take that keep cut `i` (resolved) begins, as `takes` lists it while open. Internal: the audio decisions (Timeline+Audio.swift) name it too.
    func begun(_ i: Int) -> Take {
        Take(number: i / 2 + 1, label: cuts[i].label, outputStart: cuts[i].at! - origin! - cuts[i].offsetNanos, duration: nil)
    }

    /// The takes whose start cut has resolved, in output order.
    public var takes: [Take] {
        var out: [Take] = []
        for i in stride(from: 0, to: firstUnresolved, by: 2) {
            let c = cuts[i]
            let start = c.at! - origin! - c.offsetNanos
            var duration: Nanos?
            if i + 1 < firstUnresolved {
                let end = cuts[i + 1]
                duration = end.capHit ? maxDuration! - start : end.at! - c.at!
            }
            out.append(Take(number: i / 2 + 1, label: c.label, outputStart: start, duration: duration))
        }
        return out
    }

    /// Output time left before the cap, at the horizon (nil: no cap). Status shows it.
    public var remaining: Nanos? {
        guard let cap = maxDuration else { return nil }
        guard let last = takes.last else { return cap }
        let reached = last.duration.map { last.outputStart + $0 }
            ?? max(last.outputStart, horizon - origin! - cuts[firstUnresolved - 1].offsetNanos)
        return max(0, cap - reached)
    }

    /// Total pause length so far (ns), as subtracted from video timestamps.
    public var currentOffset: Nanos {
        var i = firstUnresolved - 1
        while i >= 0 && !cuts[i].keepAfter { i -= 1 }
        return i >= 0 ? cuts[i].offsetNanos : 0
    }

    // MARK: Internals
    // Internal, not private: the extensions in Timeline+*.swift use them.

    /// The origin's sample index (0: the source's first sample).
    func startSample(_ fmt: AudioFormat, _ anchor: Nanos) -> Int64 {
        fmt.sampleIndex(at: origin! - anchor)
    }

    /// The cut that closes the last segment: the stop, or the pause a stop while paused follows.
    /// (Cuts alternate keep/drop, and a stop while paused adds no cut.)
    var finalCut: Cut { cuts[cuts.count - 1] }
}
