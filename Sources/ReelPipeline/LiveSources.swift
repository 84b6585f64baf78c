import Foundation
import Logging
import ReelCapture
import ReelControl
import ReelCore
import ReelSystem

/// Live capture sources opened apart from a recording, so that they can run before one (standby)
/// and be looked at (`snapshot`). The sources deliver here. With a recording attached every event
/// is forwarded to it as it comes; without one, a slot goes back to its pool at once, except what
/// was captured after an armed start instant (`arm`), held in its slot until the recording
/// attaches (see `StandbyState.keepsVideo`). A snapshot takes the newest frame: idle, the newest
/// the pre-roll holds; recording, the copy made of each frame as it passes (one memcpy into a
/// preallocated buffer on the capture thread); else the next frame delivered.
/// The capture threads never wait here: the lock is held only to copy or to append.
/// A live preview (`previewFrame`) takes the same copies, swapped out to the preview thread; the
/// `levels` meter runs on the audio capture thread as each block passes (`LevelsWindow`).
/// @unchecked Sendable: the mutable state is guarded by `monitor`, except `levels`, which only
/// the audio capture thread touches; the sources are immutable references.
package final class LiveSources: MediaSink, @unchecked Sendable {
    package let video: (any CaptureSource)?
    package let audio: (any CaptureSource)?
    /// The format of the video slots (what a snapshot converts from).
    package let videoFormat: VideoFormat?
    /// The first failure a source reported (device gone), naming it.
    package var failure: String? { monitor.withLock { failed } }
    /// Called (on the failing capture thread, outside any lock here) when a source fails.
    package var onFailure: (@Sendable (String) -> Void)?
    /// Where levels windows go, and who asks for preview frames (nil: nobody).
    package let feed: LiveFeed?
    package let audioFormat: AudioFormat?
    /// The levels meter, made at the first block metered; the audio capture thread's only.
    private var levels: LevelsWindow?
    /// What the idle sources keep for a `start` (`pre_roll`), and how many items of each stream
    /// they may hold (`PreRoll.holdCap`: the pools' extra slots).
    package let preRoll: PreRoll
    private let holdCap: (video: Int, audio: Int)

    private let monitor = Monitor()
    private var target: (any MediaSink)?
    private var armedAt: Nanos?
    private var held: [MediaEvent] = []
    private var failed: String?
    private var started = false
    private var stopped = false
    // Snapshot: requests since the last copy; the copy and its capture time; a counter of copies.
    private var snapshotWanted = 0
    private var snapshotBuffer: [UInt8] = []
    private var snapshotTime: Nanos = 0
    private var snapshotCount = 0
    /// The copy was swapped out to the preview thread: the buffer holds an older frame.
    private var snapshotStale = false
    /// A preview wants copies of the frames captured from this instant on (nil: no preview).
    private var previewFrom: Nanos?

    package init(video: (any CaptureSource)?, audio: (any CaptureSource)?, videoFormat: VideoFormat?,
                 audioFormat: AudioFormat? = nil, feed: LiveFeed? = nil, preRoll: PreRoll = PreRoll(0),
                 extraSlots: (video: Int, audio: Int) = (0, 0)) {
        self.preRoll = preRoll
        holdCap = (preRoll.holdCap(poolSlots: video?.pool.slots ?? 2, extraSlots: extraSlots.video),
                   preRoll.holdCap(poolSlots: audio?.pool.slots ?? 2, extraSlots: extraSlots.audio))
        self.video = video
        self.audio = audio
        self.videoFormat = videoFormat
        self.audioFormat = audioFormat
        self.feed = feed
        held.reserveCapacity((video?.pool.slots ?? 0) + (audio?.pool.slots ?? 0))
    }

    /// Opens the live sources `config` names (a camera, an ALSA device, the paced synthetic
    /// sources; files are not live: nil). `videoOnly`: a brief open for a snapshot. `preRoll`:
    /// standby's, whose extra pool slots are allocated here, once.
    package static func open(_ config: RecorderConfig, logger: Logger, videoOnly: Bool = false, feed: LiveFeed? = nil,
                             preRoll: PreRoll = PreRoll(0)) throws -> LiveSources? {
        guard config.paced else { return nil }
        if case .y4m = config.video { return nil }
        if !videoOnly, case .wav = config.audio { return nil }
        let (vs, aso, extra) = try config.openSources(logger: logger, videoOnly: videoOnly, preRoll: preRoll)
        return LiveSources(video: vs, audio: aso, videoFormat: vs == nil ? nil : config.videoFormat,
                           audioFormat: aso == nil ? nil : config.audioFormat, feed: feed, preRoll: preRoll, extraSlots: extra)
    }

    /// Whether `config`'s sources can be kept open (standby): live ones only, paced.
    package static func canBeWarm(_ config: RecorderConfig) -> Bool {
        guard config.paced else { return false }
        if case .y4m = config.video { return false }
        if case .wav = config.audio { return false }
        if case .none = config.video, case .none = config.audio { return false }
        return true
    }

    /// The camera, for `controls` and `set` while it is open here.
    package var camera: V4L2VideoSource? { video as? V4L2VideoSource }

    /// Starts both sources at a common T0 (once; later calls do nothing).
    package func start(at t0: Nanos = SystemClock.now()) {
        let first: Bool = monitor.withLock { defer { started = true }; return !started && !stopped }
        guard first else { return }
        video?.start(at: t0, sink: self)
        audio?.start(at: t0, sink: self)
    }

    /// Stops the sources (their threads end, devices closed); what is held goes back. Final.
    package func stop() {
        monitor.withLock { stopped = true; target = nil; monitor.broadcast() }
        video?.stop()
        audio?.stop()
        disarm()
    }

    /// True once a source's thread has ended (failed, or stopped).
    package var hasExited: Bool { (video?.hasExited ?? false) || (audio?.hasExited ?? false) }

    /// Frames the video source dropped so far (no free slot, or lost by the camera).
    package var videoDropped: Int64 { video?.dropped ?? 0 }

    /// From now on, keeps what is captured at or after `start` for the recording about to attach
    /// (what the pre-roll holds from then on included).
    package func arm(at start: Nanos) { monitor.withLock { armLocked(at: start) } }

    /// Under `monitor`.
    private func armLocked(at start: Nanos) {
        armedAt = start
        var kept = 0
        for e in held {
            switch e {
            case let .video(_, t) where !StandbyState.keepsVideo(capturedAt: t, start: start): release(e)
            case let .audio(_, _, _, t) where !StandbyState.keepsAudio(capturedAt: t, start: start): release(e)
            default: held[kept] = e; kept += 1
            }
        }
        held.removeLast(held.count - kept)
    }

    /// For a `start` asked at `requestedAt` wanting `want` of pre-roll: arms at `requestedAt - want`,
    /// or at the earliest instant every stream's held media covers when that is later
    /// (`PreRoll.start`). Returns the start instant and the pre-roll it got.
    package func arm(requestedAt: Nanos, preRoll want: Nanos) -> (at: Nanos, got: Nanos) {
        monitor.withLock {
            let start = PreRoll.start(requestedAt: requestedAt, want: want, heldFrom: heldFrom)
            armLocked(at: start.at)
            return start
        }
    }

    /// Idle: the pre-roll a `start` now would get (the configured one, or less while the sources
    /// have been open or back from a recording for less than that).
    package func preRollAvailable(now: Nanos) -> Nanos {
        monitor.withLock { target == nil ? preRoll.available(now: now, heldFrom: heldFrom) : 0 }
    }

    /// Under `monitor`: the earliest instant every stream's held media covers (`PreRoll.heldFrom`).
    private var heldFrom: Nanos? {
        var v: Nanos?, a: Nanos?
        for e in held {
            switch e {
            case let .video(_, t): v = min(v ?? t, t)
            case let .audio(_, _, _, t): a = min(a ?? t, t)
            case .sourceFailed, .ended: break
            }
        }
        return PreRoll.heldFrom(video: video == nil ? nil : .some(v), audio: audio == nil ? nil : .some(a))
    }

    /// Idle and not armed: the sources keep the media of the last `PreRoll.holdNs` (the pre-roll
    /// plus a margin; audio a little more), at most `holdCap` items of each stream; older items
    /// go back to their pools. Under `monitor`.
    private func trimHeld(newest: MediaEvent) {
        guard armedAt == nil else { return }
        let now: Nanos
        switch newest {
        case let .video(_, t), let .audio(_, _, _, t): now = t
        default: return
        }
        let isVideo: Bool = { if case .video = newest { return true }; return false }()
        let cap = isVideo ? holdCap.video : holdCap.audio
        var count = 0
        for e in held { if case .video = e, isVideo { count += 1 } else if case .audio = e, !isVideo { count += 1 } }
        var kept = 0
        for e in held {
            var drop = false
            switch e {
            case let .video(_, t) where isVideo: drop = count > cap || now - t > preRoll.holdNs
            case let .audio(_, _, _, t) where !isVideo: drop = count > cap || now - t > preRoll.audioHoldNs
            default: break
            }
            if drop { release(e); count -= 1 } else { held[kept] = e; kept += 1 }
        }
        held.removeLast(held.count - kept)
    }

    /// Releases what is held and stops holding (a start that failed).
    package func disarm() {
        let give: [MediaEvent] = monitor.withLock {
            armedAt = nil
            defer { held.removeAll(keepingCapacity: true) }
            return held
        }
        give.forEach(release)
    }

    /// Forwards what is held (in capture order), then everything the sources deliver, to `sink`.
    package func attach(_ sink: any MediaSink) {
        monitor.withLock {
            for e in held where !sink.deliver(e, wait: false) { release(e) }
            held.removeAll(keepingCapacity: true)
            armedAt = nil
            target = sink
        }
    }

    /// Stops forwarding to the recording (at its end; the sources go on).
    package func detach() { monitor.withLock { target = nil } }

    private func release(_ e: MediaEvent) {
        switch e {
        case let .video(slot, _): video?.pool.release(slot)
        case let .audio(slot, _, _, _): audio?.pool.release(slot)
        case .sourceFailed, .ended: break
        }
    }

    // MediaSink, on the capture threads.
    package func deliver(_ event: MediaEvent, wait: Bool) -> Bool {
        if case let .audio(slot, frames, _, time) = event, let feed, feed.wantsLevels { meter(slot, frames: frames, time: time, feed) }
        var failure: String?
        let forward: (any MediaSink)? = monitor.withLock {
            switch event {
            case let .video(slot, time):
                // While recording the slot goes to the pipeline, so the newest frame is copied as it
                // passes (one memcpy of the frame, no allocation): a snapshot then needs no wait.
                if snapshotWanted > 0 || target != nil || previewFrom.map({ time >= $0 }) == true { copySnapshot(slot, time) }
            case let .sourceFailed(msg):
                if failed == nil { failed = msg; failure = msg }
                monitor.broadcast()
            case .audio, .ended: break
            }
            if let target { return target }
            switch event {
            case .video, .audio:
                // Idle: a short pre-roll is held (so a start instant that lies before the request
                // is handled, or a frame stamped before it arrives, is still recorded); armed:
                // everything at or after the start instant, until the recording attaches.
                held.append(event)
                trimHeld(newest: event)
            case .sourceFailed, .ended: break
            }
            return nil
        }
        if let failure { onFailure?(failure) }
        // Outside the lock: an unpaced put may wait; a closed recording refuses (the source releases the slot).
        return forward?.deliver(event, wait: wait) ?? true
    }

    package func awaitTurn(video isVideo: Bool, at t: Nanos) {
        monitor.withLock { target }?.awaitTurn(video: isVideo, at: t)
    }

    /// Under `monitor`, on the capture thread: one copy of the slot.
    private func copySnapshot(_ slot: Int, _ time: Nanos) {
        guard let video else { return }
        let src = UnsafeRawBufferPointer(video.pool.buffer(slot))
        if snapshotBuffer.count != src.count { snapshotBuffer = [UInt8](repeating: 0, count: src.count) }  // once per size: the first request
        snapshotBuffer.withUnsafeMutableBytes { $0.copyMemory(from: src) }
        snapshotTime = time
        snapshotStale = false
        snapshotCount += 1
        snapshotWanted = 0
        monitor.broadcast()
    }

    /// The next video frame captured (its bytes in `videoFormat` and its capture time), waiting at
    /// most until `deadline`; nil when none came (or a source failed, or no video).
    package func nextFrame(until deadline: Nanos) -> (bytes: [UInt8], time: Nanos)? {
        guard let video else { return nil }
        return monitor.withLock {
            // Idle: the newest frame the pre-roll holds is the latest captured: at once.
            if target == nil, failed == nil, !stopped,
               let newest = held.last(where: { if case .video = $0 { return true }; return false }),
               case let .video(slot, time) = newest {
                return ([UInt8](UnsafeRawBufferPointer(video.pool.buffer(slot))), time)
            }
            // Recording: the copy of the newest frame, at once.
            if target != nil, failed == nil, !stopped, snapshotCount > 0, !snapshotStale, !snapshotBuffer.isEmpty {
                return (snapshotBuffer, snapshotTime)
            }
            let seen = snapshotCount
            snapshotWanted += 1
            while snapshotCount == seen || snapshotStale, failed == nil, !stopped, monitor.wait(until: deadline) {}
            guard snapshotCount != seen, !snapshotStale else { return nil }
            return (snapshotBuffer, snapshotTime)
        }
    }

    // MARK: Preview and levels

    /// For the preview thread: asks for copies of the frames captured from `from` on (nil: any),
    /// waits at most until `deadline` for a copy newer than copy number `seen`, and swaps it into
    /// `buffer` (sized here to a slot first; its old bytes become the next copy's buffer, so
    /// nothing is allocated or copied under the lock). Nil: no frame came (or a source failed,
    /// or the sources stopped, or no video).
    package func previewFrame(after seen: Int, from: Nanos?, into buffer: inout [UInt8], until deadline: Nanos) -> (time: Nanos, number: Int)? {
        guard let video else { return nil }
        if buffer.count != video.pool.slotBytes { buffer = [UInt8](repeating: 0, count: video.pool.slotBytes) }
        return monitor.withLock {
            previewFrom = from ?? .min
            while snapshotCount == seen || snapshotStale, failed == nil, !stopped, monitor.wait(until: deadline) {}
            guard snapshotCount != seen, !snapshotStale, failed == nil, !stopped else { return nil }
            swap(&snapshotBuffer, &buffer)
            snapshotStale = true
            return (snapshotTime, snapshotCount)
        }
    }

    /// No preview wants frames any more: frames are copied only for snapshots and recordings.
    package func endPreview() { monitor.withLock { previewFrom = nil } }

    /// On the audio capture thread: folds the block into the levels meter and publishes each
    /// window it closes. Nothing is allocated after the first block.
    private func meter(_ slot: Int, frames: Int, time: Nanos, _ feed: LiveFeed) {
        guard let audio, let format = audioFormat else { return }
        if levels == nil { levels = LevelsWindow(sampleRate: format.sampleRate, channels: format.channels) }
        // Unsafe: the slot holds `frames` interleaved S16 frames (the source wrote them as Int16) and is ours until forwarded.
        let base = UnsafeRawPointer(audio.pool.buffer(slot).baseAddress!).assumingMemoryBound(to: Int16.self)
        let samples = UnsafeBufferPointer(start: base, count: min(frames * format.channels, audio.pool.slotBytes / 2))
        var from = 0
        while from < samples.count / format.channels {
            let r = levels!.feed(samples, from: from, time: time)
            from = r.next
            if r.closed { feed.publishLevels(levels!) }
        }
    }
}
