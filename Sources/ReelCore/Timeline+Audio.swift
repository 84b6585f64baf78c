// The audio decisions: what to do with the pending samples (keep, drop, silence), the silence
// that finishes a recording, and where a take's audio ends on the video's frame grid.

extension Timeline {
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
        guard let fmt = audio, k >= 1, k + 1 == firstUnresolved,
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
