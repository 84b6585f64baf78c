// The requests that move the timeline (pause, resume, stop, undo) and what the pipeline tells
// it about time (the horizon, video ended or stalled). The rules are `Timeline`'s doc comment.

extension Timeline {
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
}
