/// What the machine tells status and the journal: the audio peak, the drop reports, the progress.
extension SessionMachine {
    // MARK: Meters

    /// Kept samples (interleaved, `channels` channels) on their way to the encoder: metered for
    /// status's peak (`audioPeak`). Silence filled in is not metered.
    public mutating func meterKept(_ samples: UnsafeBufferPointer<Int16>, channels: Int) {
        peaks.add(samples, channels: channels)
    }

    /// Per channel, the peak of the kept audio over about the last second (empty without audio).
    public mutating func audioPeak(now: Nanos) -> [Int32] {
        guard let f = configuration.audio else { return [] }
        return peaks.read(now: now, channels: f.channels)
    }

    /// The video frames dropped so far (`total`) at `now`: what to report in the journal, if anything.
    public mutating func dropsToReport(total: Int64, now: Nanos) -> (new: Int64, total: Int64)? {
        drops.observe(total: total, now: now)
    }

    // MARK: State

    /// The status of the recording so far.
    public var progress: Progress {
        var recorded: Nanos = 0
        if let out = lastKeptOutput, let fps = configuration.videoFPS {
            recorded = out + rescale(1, nanosPerSecond * fps.den, fps.num)
        }
        if let f = configuration.audio { recorded = max(recorded, f.sampleTime(timeline.audioOutput)) }
        var durations: [Nanos] = []
        var closed: Nanos = 0
        for seg in timeline.segments {
            if let end = seg.end { durations.append(end - seg.begin); closed += end - seg.begin }
            else { durations.append(max(0, recorded - closed)) }
        }
        return Progress(phase: timeline.phase, stopping: timeline.phase == .stopped, segmentDurations: durations,
                        recordedNs: recorded, frames: framesEncoded,
                        droppedFrames: Int64(timeline.videoNonMonotonic) + Int64(slots?.collisions ?? 0),
                        audioSamples: timeline.audioOutput, audioFilledSamples: audioFilled,
                        timestampFixes: ptsFixes + timeline.videoOutputFixes, sourceError: sourceFailure,
                        takes: timeline.takes, remaining: timeline.remaining, capReached: timeline.capReached,
                        origin: timeline.startInstant)
    }
}
