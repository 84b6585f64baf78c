import ReelCore
import ReelMedia
import ReelSystem

/// `--video y4m:PATH`: frames from a YUV4MPEG2 file (4:2:0 or 4:2:2), frame n stamped T0 + n/fps,
/// paced in real time or delivered as fast as the pipeline takes them. The end of the file ends
/// the recording (`.ended`). Frames reach the pipeline in I420 (`delivers`): a 4:2:2 file is
/// converted on this thread as it is read, so the conversion overlaps the encoder instead of
/// running before it on the pipeline thread.
public final class FileVideoSource: CaptureThread, CaptureSource, @unchecked Sendable {
    public let format: VideoFormat
    public let paced: Bool
    /// The pixel format of the frames in the pool: always I420.
    public let delivers = PixelFormat.i420
    // The reader and converter are used only by the capture thread once started (and by init before that).
    private let reader: MediaFileReader
    private let converter: PixelConverter?   // nil: the file is I420 already, read straight into the slot

    public init(path: String, paced: Bool, poolSlots: Int = 8) throws {
        reader = try MediaFileReader(path: path, video: true)
        guard case let .video(f) = reader.content else { throw RecorderFailure("\(path) holds no video") }
        format = f
        self.paced = paced
        converter = f.pixelFormat == .i420 ? nil : try PixelConverter(width: f.width, height: f.height, from: f.pixelFormat)
        super.init(pool: FramePool(slots: poolSlots, slotBytes: PixelFormat.i420.frameBytes(width: f.width, height: f.height)),
                   name: "reel-video-file")
    }
    public var description: String {
        "y4m:\(reader.path) \(format.width)x\(format.height) \(format.fps) \(format.pixelFormat.rawValue)\(paced ? "" : " unpaced")"
    }

    public func start(at t0: Nanos, sink: any MediaSink) {
        launch(unpaced: !paced) { [self] in
            var n: Int64 = 0
            deliveryLoop(paced: paced, video: true, sink: sink,
                         timing: { let t = t0 + format.frameTime(n); return (t, t) },
                         // A dropped frame is skipped in the file too: later frames keep their times.
                         skip: { if (try? reader.skipVideoFrame()) == true { n += 1 } },
                         produce: { slot in
                             let t = t0 + format.frameTime(n)
                             do {
                                 let read = try converter.map { c in
                                     try reader.readVideoFrame {
                                         try c.convert($0, into: pool.buffer(slot))
                                     }
                                 } ?? reader.readVideoFrame(into: pool.buffer(slot))
                                 guard read else {
                                     return .finish(.ended("end of \(reader.path) after \(n) frames", at: t, isVideo: true))
                                 }
                             } catch { return .finish(.sourceFailed("\(error)")) }
                             n += 1
                             return .deliver(.video(slot: slot, time: t))
                         })
        }
    }
}

/// `--audio wav:PATH`: 16-bit PCM from a WAV file in 10 ms chunks, sample m stamped T0 + m/rate.
public final class FileAudioSource: CaptureThread, CaptureSource, @unchecked Sendable {
    public let format: AudioFormat
    public let paced: Bool
    // The reader is used only by the capture thread once started (and by init before that).
    private let reader: MediaFileReader

    public init(path: String, paced: Bool, poolSlots: Int = 64) throws {
        reader = try MediaFileReader(path: path, video: false)
        guard case let .audio(f) = reader.content else { throw RecorderFailure("\(path) holds no audio") }
        format = f
        self.paced = paced
        super.init(pool: FramePool(slots: poolSlots, slotBytes: (f.sampleRate / 100 + 1) * f.channels * 2), name: "reel-audio-file")
    }
    public var description: String { "wav:\(reader.path) \(format.sampleRate) Hz \(format.channels) ch\(paced ? "" : " unpaced")" }

    public func start(at t0: Nanos, sink: any MediaSink) {
        launch(unpaced: !paced) { [self] in
            var m: Int64 = 0
            let chunk = format.sampleRate / 100
            deliveryLoop(paced: paced, video: false, sink: sink,
                         timing: { (t0 + format.sampleTime(m + Int64(chunk)), t0 + format.sampleTime(m)) },
                         // A dropped chunk is skipped in the file too: later samples keep their times.
                         skip: { m += Int64((try? reader.skipAudio(maxFrames: chunk)) ?? 0) },
                         produce: { slot in
                             let n: Int
                             do {
                                 n = try reader.readAudio(into: pool.buffer(slot).baseAddress!.assumingMemoryBound(to: Int16.self),
                                                          maxFrames: chunk)
                             } catch { return .finish(.sourceFailed("\(error)")) }
                             guard n > 0 else {
                                 return .finish(.ended("end of \(reader.path) after \(m) samples", at: t0 + format.sampleTime(m), isVideo: false))
                             }
                             defer { m += Int64(n) }
                             return .deliver(.audio(slot: slot, frames: n, sample: m, time: t0 + format.sampleTime(m)))
                         })
        }
    }
}
