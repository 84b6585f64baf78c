import ReelCapture
import ReelCore
import ReelSystem

/// What other threads call on a recording: the control plane's requests (answered by the
/// pipeline thread through the queue) and the capture threads' hand-over (`MediaSink`).
extension RecordingSession {
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
    func stallForTest() {
        guard TestHooks.pipelineStallRequested() else { return }
        logger.warning("test hook \(TestHooks.stallPipelineVariable): stalling the pipeline thread")
        while TestHooks.pipelineStallRequested() { SystemClock.sleep(until: SystemClock.now() + 20_000_000) }
        logger.warning("test hook \(TestHooks.stallPipelineVariable): the pipeline thread goes on")
    }
}
