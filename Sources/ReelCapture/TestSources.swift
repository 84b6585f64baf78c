import Foundation
import ReelCore

/// `--video test`: the synthetic video source of shared/test-sources.md.
public final class TestVideoSource: CaptureThread, CaptureSource, @unchecked Sendable {
    public let format: VideoFormat
    public let paced: Bool
    private let pattern: TestVideoPattern

    /// `poolSlots` nil: about a second of frames when paced (a live source), 8 when unpaced;
    /// plus `extraSlots` (standby's pre-roll, `PreRoll.videoSlots`).
    public init(format: VideoFormat, paced: Bool, poolSlots: Int? = nil, extraSlots: Int = 0) {
        self.format = format
        self.paced = paced
        pattern = TestVideoPattern(format: format)
        let bytes = format.pixelFormat.frameBytes(width: format.width, height: format.height)
        let slots = poolSlots ?? (paced ? FramePool.liveVideoSlots(frameBytes: bytes, fps: format.fps) : 8)
        super.init(pool: FramePool(slots: slots + extraSlots, slotBytes: bytes),
                   name: "reel-video-test")
    }
    public var description: String {
        "test \(format.width)x\(format.height) \(format.fps) \(format.pixelFormat.rawValue)\(paced ? "" : " unpaced")"
    }

    public func start(at t0: Nanos, sink: any MediaSink) {
        launch(unpaced: !paced) { [self] in
            var n: Int64 = 0
            deliveryLoop(paced: paced, video: true, sink: sink,
                         timing: { let t = t0 + format.frameTime(n); return (t, t) },
                         skip: { n += 1 },
                         produce: { slot in
                             pattern.render(frame: n, into: pool.buffer(slot))
                             defer { n += 1 }
                             return .deliver(.video(slot: slot, time: t0 + format.frameTime(n)))
                         })
        }
    }
}

/// `--audio test`: the synthetic audio source, delivered in 10 ms chunks, its sample clock
/// skewed by `--test-audio-skew-ppm` against CLOCK_MONOTONIC.
public final class TestAudioSource: CaptureThread, CaptureSource, @unchecked Sendable {
    public let signal: TestAudioSignal
    public let paced: Bool

    /// 200 chunks of 10 ms: the pipeline may be held up 2 s before a chunk drops, as with ALSA.
    public init(format: AudioFormat, skewPpm: Int64, paced: Bool, poolSlots: Int = 200) {
        signal = TestAudioSignal(format: format, skewPpm: skewPpm)
        self.paced = paced
        let maxChunk = format.sampleRate / 100 + 1
        super.init(pool: FramePool(slots: poolSlots, slotBytes: maxChunk * format.channels * 2), name: "reel-audio-test")
    }
    public var description: String {
        "test \(signal.format.sampleRate) Hz \(signal.format.channels) ch\(signal.skewPpm != 0 ? " skew \(signal.skewPpm) ppm" : "")\(paced ? "" : " unpaced")"
    }

    public func start(at t0: Nanos, sink: any MediaSink) {
        launch(unpaced: !paced) { [self] in
            var i: Int64 = 0
            // A chunk is delivered once its last sample has been captured. A dropped chunk is what a
            // live card's overrun looks like: the pipeline fills the gap with silence.
            deliveryLoop(paced: paced, video: false, sink: sink,
                         timing: { (t0 + signal.captureTime(sample: signal.chunkStart(i + 1)),
                                    t0 + signal.captureTime(sample: signal.chunkStart(i))) },
                         skip: { i += 1 },
                         produce: { slot in
                             let a = signal.chunkStart(i), b = signal.chunkStart(i + 1)
                             i += 1
                             signal.render(from: a, frames: Int(b - a),
                                           into: pool.buffer(slot).baseAddress!.assumingMemoryBound(to: Int16.self))
                             return .deliver(.audio(slot: slot, frames: Int(b - a), sample: a, time: t0 + signal.captureTime(sample: a)))
                         })
        }
    }
}
