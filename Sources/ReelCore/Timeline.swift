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

    var cuts: [Cut]
    var firstUnresolved = 0
    public private(set) var phase: Phase = .recording
    /// No future request can be earlier than this instant.
    public private(set) var horizon: Nanos
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
    public private(set) var lastKeptTake: Int?
    /// The take of the last frame judged `.keep` (nil before the first, or once an undo removed
    /// every take that kept one): its number and label, read from `lastKeptTake`'s keep cut (take
    /// n begins at cut 2(n-1)), so an undo that moves `lastKeptTake` back moves it too.
    public var videoTake: Take? { lastKeptTake.map { begun(2 * ($0 - 1)) } }
    /// The take of the last samples `nextAudioAction` kept (`.keep` or `.silence`; nil before the first).
    public private(set) var audioTake: Take?

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
    public private(set) var audioReceived: Int64 = 0
    /// Position of the next undecided sample; negative while owing silence before the source began.
    var audioPos: Int64?
    var audioCursor = 0
    /// Samples emitted to the encoder (kept + silence): the output audio length.
    public private(set) var audioOutput: Int64 = 0
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
        let instant = max(t, horizon, lastRequested)
        lastRequested = instant
        switch r {
        case .pause: cuts.append(Cut(keepAfter: false, isStop: false, requested: instant))
        case .resume: cuts.append(Cut(keepAfter: true, isStop: false, requested: instant, label: label))
        case .stop:
            // Stopping while paused adds no cut: the last segment is already closed (or, every
            // take undone, there is none).
            if phase == .recording { cuts.append(Cut(keepAfter: false, isStop: true, requested: instant)) }
            phase = .stopped
            stopRequested = instant
        }
        if !hasVideo { resolveAtRequests(upTo: max(instant, horizon)) } else { issueCap { _ in } }
        return phase
    }

    /// A stop at `t` that comes before requests placed later (a one-shot's schedule: its pauses
    /// and the stop at its duration): those are dropped as they are, unresolved (nothing was
    /// decided on them), the phase is what the requests left stand make it, and the recording
    /// stops at `t` as `request(.stop)` stops it. With nothing placed after `t` it is exactly
    /// `request(.stop)`; refused as a second stop when a stop at or before `t` is placed already.
    @discardableResult
    public mutating func stopBeforeLaterRequests(at t: Nanos) throws(RequestError) -> Phase {
        let instant = max(t, horizon)
        if let placed = stopRequested, placed <= instant { throw .wrongPhase(request: .stop, phase: .stopped) }
        var k = cuts.count
        // An undo's pending cut stays (it settles a take already removed), and what precedes it.
        while k > firstUnresolved, cuts[k - 1].requested > instant, !cuts[k - 1].isUndo { k -= 1 }
        if k < cuts.count || stopRequested != nil {
            cuts.removeSubrange(k...)
            stopRequested = nil
            if let last = cuts.last { phase = last.keepAfter ? .recording : (last.isStop ? .stopped : .paused) } else { phase = .paused }
            lastRequested = max(horizon, cuts.last?.requested ?? originRequested)
        }
        return try request(.stop, at: instant)
    }

    /// Removes the last take (see the rules): while recording it ends at `t` (clamped like a
    /// request); the timeline is paused after it. Refused while stopping, or with no take left.
    ///
    /// With a cap, a take whose start cut is still pending (its first frame not yet in) may turn
    /// out to reach the cap before the undo's instant: such an undo is settled when the start
    /// resolves (removed then, before any of its media is decided, or void if the cap came first:
    /// the cap's stop wins, by capture time). Its decision rolls nothing back: nothing of the take
    /// was output. A further undo is refused (`undoPending`) until it is settled.
    ///
    /// `expecting`: the take the caller means to remove; refused (`wrongTake`) when the last take
    /// is another, so a retry of an undo whose answer was lost cannot remove a second take.
    public mutating func undo(at t: Nanos, expecting: Int? = nil) throws(RequestError) -> Undo {
        guard phase != .stopped else { throw .cannotUndo(phase: .stopped) }
        guard !cuts.contains(where: \.isUndo) else { throw .undoPending }
        guard let k = cuts.lastIndex(where: \.keepAfter) else { throw .cannotUndo(phase: phase) }
        if let expecting, expecting != k / 2 + 1 { throw .wrongTake(expected: expecting, last: k / 2 + 1) }
        let instant = max(t, horizon, lastRequested)
        lastRequested = instant
        let take = cuts[k]
        if k >= firstUnresolved, maxDuration != nil {
            if k + 1 < cuts.count { cuts[k + 1].isUndo = true }
            else { cuts.append(Cut(keepAfter: false, isStop: false, requested: instant, isUndo: true)) }
            phase = .paused
            return Undo(take: k / 2 + 1, label: take.label, outputStart: nil, videoOutputFrom: nil, framesRemoved: 0,
                        audioOutput: audioOutput, samplesRemoved: 0)
        }
        var start: Nanos?
        var audioFrom = audioOutput
        if k < firstUnresolved {
            start = take.at! - origin! - take.offsetNanos
            // Samples are emitted in order: less than its start emitted means none of it was.
            audioFrom = min(audioOutput, take.rel - take.offsetSamples)
        }
        let decision = Undo(take: k / 2 + 1, label: take.label, outputStart: start, videoOutputFrom: take.firstVideoOutput,
                            framesRemoved: take.framesKept, audioOutput: audioFrom, samplesRemoved: audioOutput - audioFrom)
        if take.framesKept > 0 { lastVideoOutput = take.videoOutputBefore }
        if let n = lastKeptTake, n >= decision.take { lastKeptTake = n > 1 ? n - 1 : nil }
        audioOutput = audioFrom
        cuts.removeSubrange(k...)
        firstUnresolved = min(firstUnresolved, k)
        videoCursor = min(videoCursor, k)
        audioCursor = min(audioCursor, k)
        phase = .paused
        return decision
    }

    /// The video stream has ended at `t` (just past its last frame): no frame will ever resolve a
    /// pending cut, so each resolves at `t` (a cut scheduled later than the end lands on it).
    public mutating func videoEnded(at t: Nanos) {
        horizon = max(horizon, t)
        if origin == nil { origin = t }
        while firstUnresolved < cuts.count {
            resolve(firstUnresolved, at: t)
            issueCap { _ in }  // the loop resolves the cap's stop, if issued, at `t` too
        }
    }

    /// Tells the timeline that no request will ever come earlier than `t` (the pipeline passes
    /// CLOCK_MONOTONIC now in paced mode).
    public mutating func advance(to t: Nanos) {
        horizon = max(horizon, t)
        if hasVideo { issueCap { _ in } } else { resolveAtRequests(upTo: horizon) }
    }

    /// Video has stopped *arriving* (a camera that hangs without an error): pending cuts requested
    /// at or before `t` resolve at their request instants instead of waiting for a frame. The
    /// caller decides on arrivals, never on how far behind its own processing is: frames waiting
    /// in a queue still resolve cuts on the frame grid.
    public mutating func videoStalled(upTo t: Nanos) {
        horizon = max(horizon, t)
        resolveAtRequests(upTo: t)
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
        guard let fmt = audio, let anchor, let s = origin, !audioClosed else { return nil }
        let aS = startSample(fmt, anchor)
        // Decidable up to the earliest sample a pending or future cut could land on.
        var cutLimit = Int64.max
        if firstUnresolved < cuts.count {
            cutLimit = aS + fmt.sampleIndex(at: cuts[firstUnresolved].requested - s)
        } else if phase != .stopped {
            cutLimit = aS + fmt.sampleIndex(at: horizon - s)
        }
        // A running take stops at the cap at the latest.
        if firstUnresolved > 0, cuts[firstUnresolved - 1].keepAfter, let c = cuts[firstUnresolved - 1].capRel {
            cutLimit = min(cutLimit, aS + c)
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
                audioOutput += n
                audioTake = begun(audioCursor - 1)
                return .silence(Int(n))
            }
            if kept { audioOutput += n; audioTake = begun(audioCursor - 1); return .keep(Int(n)) }
            return .drop(Int(n))
        }
    }

    /// For a source that stopped delivering: the silence that completes the recorded span.
    /// Only valid once every cut is resolved (after a stop).
    public mutating func silenceToFinish() -> Int {
        guard let fmt = audio, origin != nil, isStopResolved, !cuts.isEmpty else { return 0 }
        let aS = anchor.map { startSample(fmt, $0) } ?? 0
        let endSample = aS + finalCut.rel
        let kept = keptSamples(from: audioPos ?? aS, to: endSample, aS: aS)
        audioPos = max(audioPos ?? aS, endSample)
        audioCursor = firstUnresolved
        audioClosed = true
        audioOutput += kept
        return Int(kept)
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

    /// Ends the audio at output time `t` instead of at the end cut's instant (see `endOutput`):
    /// the pipeline puts the end on its video frame grid, where the last frame's slot ends, so
    /// the two streams end together (the cut's instant is a frame's jittered capture time).
    /// Never before the take's start, past the cap, or before samples already decided (the
    /// audio up to the stop's request instant may be kept already); moves no cut instant, so
    /// takes and segments keep their lengths.
    public mutating func endAudio(atOutput t: Nanos) {
        guard let fmt = audio, endOutput != nil, !audioClosed else { return }
        let k = cuts.count - 2
        var rel = max(cuts[k].rel, cuts[k].offsetSamples + fmt.sampleIndex(at: t))
        if let c = cuts[k].capRel { rel = min(rel, c) }
        if let anchor, let pos = audioPos {
            rel = max(rel, pos - startSample(fmt, anchor))
        }
        cuts[k + 1].rel = rel
    }

    /// Ends the take that pause cut `k` closes at output time `t` instead of at the cut's instant,
    /// as `endAudio(atOutput:)` does for a stop: the pipeline puts it on its video frame grid, where
    /// the slot of the frame that resolved the pause begins, so the take's audio ends with its
    /// last frame and the next take's first frame and first sample start together there. Only
    /// while the cut after it is pending (the resume's offset is taken from this cut's sample
    /// when it resolves); never for a cut at the cap; clamped like `endAudio`. Moves no instant.
    mutating func endAudio(ofPause k: Int, atOutput t: Nanos) {
        guard let fmt = audio, k >= 1, k < firstUnresolved, k + 1 == firstUnresolved || k + 1 == cuts.count,
              !cuts[k].keepAfter, !cuts[k].isStop, !cuts[k].capHit, !audioClosed else { return }
        let take = cuts[k - 1]
        var rel = max(take.rel, take.offsetSamples + fmt.sampleIndex(at: t))
        if let c = take.capRel { rel = min(rel, c) }
        if let anchor, let pos = audioPos { rel = max(rel, pos - startSample(fmt, anchor)) }
        cuts[k].rel = rel
    }

    /// Samples (per channel) the audio source must have delivered for the recording to finish;
    /// nil until the stop is resolved and audio is anchored.
    public var audioNeededForFinish: Int64? {
        guard let fmt = audio, let anchor, origin != nil, isStopResolved, !cuts.isEmpty else { return nil }
        return startSample(fmt, anchor) + finalCut.rel
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

    /// The take that keep cut `i` (resolved) begins, as `takes` lists it while open.
    private func begun(_ i: Int) -> Take {
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

    /// The origin's sample index (0: the source's first sample).
    private func startSample(_ fmt: AudioFormat, _ anchor: Nanos) -> Int64 {
        fmt.sampleIndex(at: origin! - anchor)
    }

    /// The cut that closes the last segment: the stop, or the pause a stop while paused follows.
    /// (Cuts alternate keep/drop, and a stop while paused adds no cut.)
    private var finalCut: Cut { cuts[cuts.count - 1] }

    private mutating func resolvePending(upTo t: Nanos, at instant: Nanos?) {
        while firstUnresolved < cuts.count, cuts[firstUnresolved].requested <= t {
            resolve(firstUnresolved, at: instant ?? cuts[firstUnresolved].requested)
        }
    }

    /// Resolves the cuts requested up to `t` at their request instants (no video, or stalled),
    /// and the cap's stop if it is issued.
    private mutating func resolveAtRequests(upTo t: Nanos) {
        if origin == nil, originRequested <= t { origin = originRequested }
        resolvePending(upTo: t, at: nil)
        issueCap { tl in tl.resolvePending(upTo: t, at: nil) }
    }

    /// Issues the cap's stop when it is certain (see the rules), then resolves what `resolveMore` can.
    private mutating func issueCap(_ resolveMore: (inout Timeline) -> Void) {
        let k = firstUnresolved - 1
        guard k >= 0, cuts[k].keepAfter, let x = cuts[k].capAt else { return }
        if k + 1 < cuts.count {
            guard !cuts[k + 1].isCapStop, cuts[k + 1].requested >= x else { return }
        } else {
            guard horizon >= x else { return }
        }
        // No request can come before X any more: the cap stops the take there, and what was
        // asked for later is void.
        cuts.removeSubrange((k + 1)...)
        cuts.append(Cut(keepAfter: false, isStop: true, requested: x, isCapStop: true))
        lastRequested = max(lastRequested, x)
        phase = .stopped
        stopRequested = x
        resolveMore(&self)
    }

    private mutating func resolve(_ i: Int, at instant: Nanos) {
        precondition(i == firstUnresolved)
        let at = i > 0 ? max(instant, cuts[i - 1].at!) : instant
        cuts[i].at = at
        if origin == nil { origin = at }
        if let fmt = audio { cuts[i].rel = fmt.sampleIndex(at: at - origin!) }
        if i == 0 {
            // The start, or, every take undone, the resume that begins the output again: all
            // since the origin counts as pause (output time within half a sample of 0, sample 0).
            cuts[0].offsetSamples = cuts[0].rel
            cuts[0].offsetNanos = audio.map { rescale(cuts[0].rel, nanosPerSecond, Int64($0.sampleRate)) } ?? at - origin!
        }
        if !cuts[i].keepAfter, i > 0, let x = cuts[i - 1].capAt,
           at >= x || cuts[i].rel >= (cuts[i - 1].capRel ?? .max) {
            // The take reached the cap: it ends there, audio to the sample (video to the frame: no
            // frame at or after X comes before this cut). A pause asked before X whose frame lands
            // at or after it leaves the recording paused with no time left.
            if let c = cuts[i - 1].capRel { cuts[i].rel = c }
            cuts[i].capHit = true
        }
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
        if cuts[i].keepAfter, let cap = maxDuration {
            // No time left (a pause landed on the cap): the take stops at once.
            cuts[i].capAt = max(at, origin! + cuts[i].offsetNanos + cap)
            if let fmt = audio {
                cuts[i].capRel = max(cuts[i].rel, cuts[i].offsetSamples + fmt.sampleIndex(at: cap))
                if cuts[i].capRel == cuts[i].rel { cuts[i].capAt = at }
            }
            if i + 1 < cuts.count, cuts[i + 1].isUndo, cuts[i + 1].requested < cuts[i].capAt! {
                // A deferred undo, asked before this take could reach the cap: the take goes now,
                // before any of its media is decided. (Asked at or after X: the cap's stop replaces it.)
                cuts.removeSubrange(i...(i + 1))
                return
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
