import Foundation
import Logging
import ReelCore
import ReelMedia

/// Which sources and encoder settings a recording uses.
public struct RecorderConfig: Sendable {
    public enum Video: Sendable {
        case none, test(VideoFormat)
        /// A V4L2 camera (`/dev/videoN`) at exactly this format, size and rate.
        case v4l2(device: String, CameraRequest)
    }
    public enum Audio: Sendable {
        case none, test(AudioFormat, skewPpm: Int64)
        /// An ALSA capture device (`hw:1,0`, `plughw:1,0`, `default`, ...).
        case alsa(device: String, AudioFormat)
    }
    public var outputDir: String
    public var video: Video
    public var audio: Audio
    public var paced: Bool
    public var h264: H264Settings
    public var aac: AACSettings
    public init(outputDir: String, video: Video, audio: Audio, paced: Bool, h264: H264Settings, aac: AACSettings) {
        self.outputDir = outputDir; self.video = video; self.audio = audio; self.paced = paced; self.h264 = h264; self.aac = aac
    }
    /// What the pipeline receives from the video source (a camera's MJPEG arrives as I420).
    public var videoFormat: VideoFormat? {
        switch video {
        case .none: return nil
        case let .test(f): return f
        case let .v4l2(_, r): return VideoFormat(width: r.width, height: r.height, fps: r.fps, pixelFormat: r.pixelFormat.delivered)
        }
    }
    public var audioFormat: AudioFormat? {
        switch audio {
        case .none: return nil
        case let .test(f, _), let .alsa(_, f): return f
        }
    }
    /// The video source as status shows it while idle, e.g. "v4l2 /dev/video0 640x360 30 yuyv".
    public var videoDescription: String {
        switch video {
        case .none: return "none"
        case let .test(f): return "test \(f.width)x\(f.height) \(f.fps) \(f.pixelFormat.rawValue)"
        case let .v4l2(d, r): return "v4l2 \(d) \(r.width)x\(r.height) \(r.fps) \(r.pixelFormat.rawValue)"
        }
    }
    public var audioDescription: String {
        switch audio {
        case .none: return "none"
        case let .test(f, _): return "test \(f.sampleRate) Hz \(f.channels) ch"
        case let .alsa(d, f): return "alsa \(d) \(f.sampleRate) Hz \(f.channels) ch"
        }
    }
}

/// What the control plane can see of a running recording; published by the pipeline thread.
public struct SessionSnapshot: Sendable {
    public var phase: Timeline.Phase = .recording
    public var stopping = false
    public var segmentDurations: [Nanos] = []
    public var recordedNs: Nanos = 0
    public var frames: Int64 = 0
    public var droppedFrames: Int64 = 0
    public var audioSamples: Int64 = 0
    public var audioFilledSamples: Int64 = 0
    public var timestampFixes: Int = 0
    /// Why a source stopped the recording early (device gone), naming the device.
    public var sourceError: String?
}

/// One recording: sources -> timeline -> encoders -> MP4, from `start` to the renamed file.
///
/// Threads: each source has its capture thread; everything else (timeline, pixel conversion,
/// encoding, muxing) runs on this session's pipeline thread, fed by one bounded queue. Capture
/// threads never wait on it when live: a full pool or queue drops the sample and counts it.
/// @unchecked Sendable: fields marked "pipeline thread" are touched only by that thread once
/// `start()` has launched it; the rest are immutable or guarded (`queue`, `monitor`, promises).
final class RecordingSession: MediaSink, @unchecked Sendable {
    enum Outcome: Sendable { case ok(Timeline.Phase), refused(String), failed(String) }
    enum Event: Sendable {
        case media(MediaEvent)
        case request(Timeline.Request, at: Nanos?, reply: Promise<Outcome>)
    }

    let partPath: String
    let finalPath: String
    let config: RecorderConfig
    private let logger: Logger
    private let queue = BlockingQueue<Event>(capacity: 1024)
    /// Fulfilled with the final path, or an error message, when the pipeline thread ends.
    let finished = Promise<Result<String, RecorderFailure>>()
    private let monitor = Monitor()
    private var snapshotValue = SessionSnapshot()

    // Pipeline thread.
    private let videoSource: (any CaptureSource)?
    private let audioSource: (any CaptureSource)?
    private var timeline: Timeline!
    private let converter: PixelConverter?
    private let h264: H264Encoder?
    private let aac: AACEncoder?
    private let mux: MP4Writer
    private var fifo: AudioFifo
    private let silence: [Int16]
    private var lastVideoPts: Int64 = Int64.min
    private var lastVideoSlot: Int64 = Int64.min
    private var lastKeptOutput: Nanos?
    private var ptsFixes = 0
    private var framesWritten: Int64 = 0
    private var audioFirstSample: Int64?
    private var audioReceived: Int64 = 0
    private var audioFilled: Int64 = 0
    private var sourceFailure: String?
    private var stopResolvedAt: Nanos?

    init(config: RecorderConfig, partPath: String, finalPath: String, logger: Logger) throws {
        self.config = config
        self.partPath = partPath
        self.finalPath = finalPath
        self.logger = logger
        var vs: (any CaptureSource)?
        var aso: (any CaptureSource)?
        switch config.video {
        case .none: vs = nil
        case let .test(f): vs = TestVideoSource(format: f, paced: config.paced)
        case let .v4l2(device, request): vs = try V4L2VideoSource(path: device, request: request, logger: logger)
        }
        switch config.audio {
        case .none: aso = nil
        case let .test(f, skew): aso = TestAudioSource(format: f, skewPpm: skew, paced: config.paced)
        case let .alsa(device, f): aso = try ALSAAudioSource(device: device, format: f, logger: logger)
        }
        videoSource = vs
        audioSource = aso
        if let f = config.videoFormat {
            converter = try PixelConverter(width: f.width, height: f.height, from: f.pixelFormat)
            h264 = try H264Encoder(width: f.width, height: f.height, fps: f.fps, settings: config.h264)
        } else { converter = nil; h264 = nil }
        if let f = config.audioFormat {
            aac = try AACEncoder(format: f, settings: config.aac)
            fifo = AudioFifo(channels: f.channels, capacityFrames: f.sampleRate * 10)
            silence = [Int16](repeating: 0, count: 1024 * f.channels)
        } else {
            aac = nil
            fifo = AudioFifo(channels: 1, capacityFrames: 1)
            silence = []
        }
        mux = try MP4Writer(path: partPath, video: h264, audio: aac)
    }

    var sourceDescriptions: (video: String?, audio: String?) { (videoSource?.description, audioSource?.description) }

    var snapshot: SessionSnapshot { monitor.withLock { snapshotValue } }

    /// Starts the sources at a common T0 and the pipeline thread.
    func start() {
        let t0 = SystemClock.now()
        timeline = Timeline(start: t0, hasVideo: videoSource != nil, audio: config.audioFormat)
        let thread = Thread { [self] in run() }
        thread.name = "reel-pipeline"
        thread.start()
        videoSource?.start(at: t0, sink: self)
        audioSource?.start(at: t0, sink: self)
    }

    // MediaSink, called on capture threads.
    func deliver(_ event: MediaEvent, wait: Bool) -> Bool {
        wait ? queue.put(.media(event)) : queue.offer(.media(event))
    }

    /// Asks the pipeline for a pause, resume or stop at the current instant. Blocks briefly.
    func request(_ r: Timeline.Request) -> Outcome {
        let reply = Promise<Outcome>()
        let at: Nanos? = config.paced ? SystemClock.now() : nil // unpaced: at the media position reached
        guard queue.put(.request(r, at: at, reply: reply)) else { return .refused("cannot \(r): the recording is finishing") }
        return reply.wait(until: SystemClock.now() + 10 * nanosPerSecond) ?? .failed("cannot \(r): the pipeline did not answer within 10 s")
    }

    // MARK: Pipeline thread

    private func run() {
        var failure: String?
        do {
            while true {
                let event = queue.take(until: SystemClock.now() + 20_000_000)
                if config.paced { timeline.advance(to: SystemClock.now()) }
                if let event { try handle(event) }
                try drainAudio()
                if let msg = sourceFailure, timeline.phase != .stopped {
                    logger.error("\(msg); finishing the recording \(partPath)")
                    _ = try? timeline.request(.stop, at: timeline.horizon)
                }
                publish()
                if timeline.isStopResolved {
                    let now = SystemClock.now()
                    if stopResolvedAt == nil { stopResolvedAt = now }
                    if timeline.isFinished { break }
                    if sourceFailure != nil || now - stopResolvedAt! > 2 * nanosPerSecond {
                        // The audio source stopped delivering: complete the span with silence.
                        let n = timeline.silenceToFinish()
                        if n > 0 { logger.warning("audio source delivered no samples for the last \(n) frames; filled with silence") }
                        try encodeSilence(n)
                        break
                    }
                }
            }
        } catch {
            failure = "\(error)"
            logger.error("recording \(partPath) failed: \(error)")
        }
        finish(failure: failure)
    }

    private func handle(_ event: Event) throws {
        switch event {
        case let .request(r, at, reply):
            do {
                let phase = try timeline.request(r, at: at ?? timeline.horizon)
                logger.info("\(r) requested (\(partPath))")
                reply.fulfill(.ok(phase))
            } catch {
                reply.fulfill(.refused(error.description))
            }
        case let .media(.video(slot, time)):
            defer { videoSource!.pool.release(slot) }
            guard case let .keep(out) = timeline.video(at: time), let h264, let converter else { return }
            let frame = try converter.convert(UnsafeRawBufferPointer(videoSource!.pool.buffer(slot)))
            // The output frame slot nearest the capture time: a camera's timestamps jitter
            // (vivid under emulation by ±10 ms), so they are snapped to the frame grid; a frame
            // that lands on a taken slot takes the next one. Dropped frames leave empty slots,
            // so timing still follows capture time. Synthetic frames are on the grid already.
            let f = config.videoFormat!
            var slot = rescale(out, f.fps.num, nanosPerSecond * f.fps.den)
            if slot <= lastVideoSlot { slot = lastVideoSlot + 1 }
            lastVideoSlot = slot
            var pts = rescale(slot, h264.timeBase.den * f.fps.den, f.fps.num * h264.timeBase.num)
            if pts <= lastVideoPts { pts = lastVideoPts + 1; ptsFixes += 1 }
            lastVideoPts = pts
            lastKeptOutput = out
            try h264.encode(frame, pts: pts) { try mux.writeVideo($0) }
            framesWritten += 1
        case let .media(.audio(slot, frames, sample, time)):
            defer { audioSource!.pool.release(slot) }
            if audioFirstSample == nil { audioFirstSample = sample }
            let rel = sample - audioFirstSample!
            if rel > audioReceived {
                // Samples the source lost: silence keeps every later sample at its true time.
                let gap = Int(rel - audioReceived)
                try reserveAudio(gap)
                fifo.append(nil, frames: gap)
                timeline.audioArrived(count: gap, captureTime: time)
                audioReceived += Int64(gap); audioFilled += Int64(gap)
            }
            let skip = Int(max(0, audioReceived - rel))  // overlap: never expected, never duplicated
            guard frames > skip else { return }
            try reserveAudio(frames - skip)
            let base = UnsafeRawPointer(audioSource!.pool.buffer(slot).baseAddress!).assumingMemoryBound(to: Int16.self)
            fifo.append(base + skip * fifo.channels, frames: frames - skip)
            timeline.audioArrived(count: frames - skip, captureTime: time)
            audioReceived += Int64(frames - skip)
            if videoSource == nil && !config.paced, let f = config.audioFormat {
                timeline.advance(to: time + f.sampleTime(Int64(frames)))
            }
        case let .media(.sourceFailed(msg)):
            sourceFailure = msg
        }
    }

    private func reserveAudio(_ frames: Int) throws {
        guard frames <= fifo.room else {
            throw RecorderFailure("audio backlog exceeded 10 s waiting for video to decide the cuts (is the camera delivering?)")
        }
    }

    private func drainAudio() throws {
        guard let aac else { return }
        while let action = timeline.nextAudioAction() {
            switch action {
            case let .keep(n): try fifo.consume(n) { samples in try aac.encode(interleaved: samples) { try mux.writeAudio($0) } }
            case let .drop(n): fifo.discard(n)
            case let .silence(n): try encodeSilence(n)
            }
        }
    }

    private func encodeSilence(_ frames: Int) throws {
        guard let aac, let f = config.audioFormat else { return }
        var left = frames
        try silence.withUnsafeBufferPointer { zeros in
            while left > 0 {
                let n = min(left, 1024)
                try aac.encode(interleaved: UnsafeBufferPointer(rebasing: zeros[0..<(n * f.channels)])) { try mux.writeAudio($0) }
                left -= n
            }
        }
    }

    private func publish() {
        var s = SessionSnapshot()
        s.phase = timeline.phase
        s.stopping = timeline.phase == .stopped
        s.frames = framesWritten
        s.audioSamples = timeline.audioOutput
        s.audioFilledSamples = audioFilled
        s.droppedFrames = (videoSource?.dropped ?? 0) + Int64(timeline.videoNonMonotonic)
        s.timestampFixes = ptsFixes + timeline.videoOutputFixes
        s.sourceError = sourceFailure
        // Recorded duration: the output reached so far (video frame end, or audio length).
        var recorded: Nanos = 0
        if let out = lastKeptOutput, let f = config.videoFormat { recorded = out + f.frameTime(1) }
        if let f = config.audioFormat { recorded = max(recorded, f.sampleTime(timeline.audioOutput)) }
        s.recordedNs = recorded
        var closed: Nanos = 0
        for seg in timeline.segments {
            if let end = seg.end { s.segmentDurations.append(end - seg.begin); closed += end - seg.begin }
            else { s.segmentDurations.append(max(0, recorded - closed)) }
        }
        monitor.withLock { snapshotValue = s }
    }

    /// Drains the encoders, writes the trailer, renames NAME.mp4.part to NAME.mp4. On failure the
    /// .part file (fragmented, so playable up to its last fragment) is still finalised if possible.
    private func finish(failure: String?) {
        queue.close()
        videoSource?.stop()
        audioSource?.stop()
        while let e = queue.take(until: 0) {
            if case let .request(_, _, reply) = e { reply.fulfill(.refused("the recording is finishing")) }
        }
        var error = failure
        do {
            try h264?.flush { try mux.writeVideo($0) }
            try aac?.flush { try mux.writeAudio($0) }
            try mux.finish()
            if rename(partPath, finalPath) != 0 {
                throw RecorderFailure("cannot rename \(partPath) to \(finalPath): \(String(cString: strerror(errno)))")
            }
        } catch let e {
            error = error ?? "\(e)"
            logger.error("finishing \(partPath) failed: \(e)")
        }
        publish()
        if let error { finished.fulfill(.failure(RecorderFailure(error))) } else { finished.fulfill(.success(finalPath)) }
    }
}

public struct RecorderFailure: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ d: String) { description = d }
}
