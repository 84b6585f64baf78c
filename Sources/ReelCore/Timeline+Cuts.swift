// The resolution of cuts: a pending cut gets its instant (a frame's capture time, or its request
// instant), its cut sample and offset, and the length cap's stop is issued when it is certain.

// Internal, not private: the requests, the video judgement and `init` call them.
extension Timeline {
    mutating func resolvePending(upTo t: Nanos, at instant: Nanos?) {
        while firstUnresolved < cuts.count, cuts[firstUnresolved].requested <= t {
            resolve(firstUnresolved, at: instant ?? cuts[firstUnresolved].requested)
        }
    }

    /// Resolves the cuts requested up to `t` at their request instants (no video, or stalled),
    /// and the cap's stop if it is issued.
    mutating func resolveAtRequests(upTo t: Nanos) {
        if origin == nil, originRequested <= t { origin = originRequested }
        resolvePending(upTo: t, at: nil)
        issueCap { tl in tl.resolvePending(upTo: t, at: nil) }
    }

    /// Issues the cap's stop when it is certain (see the rules), then resolves what `resolveMore` can.
    mutating func issueCap(_ resolveMore: (inout Timeline) -> Void) {
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

    mutating func resolve(_ i: Int, at instant: Nanos) {
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
}
