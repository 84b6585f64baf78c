/// Raw video pixel formats Reel accepts from a source (what a webcam delivers, or a Y4M file:
/// `i422` is planar 4:2:2).
public enum PixelFormat: String, Sendable, CaseIterable, Codable {
    case yuyv, uyvy, i420, nv12, i422

    /// Bytes of one frame of `width` x `height` (width and height even).
    public func frameBytes(width: Int, height: Int) -> Int {
        switch self {
        case .yuyv, .uyvy, .i422: return width * height * 2
        case .i420, .nv12: return width * height * 3 / 2
        }
    }
}

/// What a video source delivers.
public struct VideoFormat: Hashable, Sendable, Codable {
    public var width: Int
    public var height: Int
    public var fps: Rational
    public var pixelFormat: PixelFormat
    public init(width: Int, height: Int, fps: Rational, pixelFormat: PixelFormat) {
        self.width = width; self.height = height; self.fps = fps; self.pixelFormat = pixelFormat
    }
    /// Duration of frame `n`'s start: n / fps in ns, rounded to nearest.
    public func frameTime(_ n: Int64) -> Nanos { rescale(n, nanosPerSecond * fps.den, fps.num) }
}

/// What an audio source delivers: interleaved signed 16-bit little-endian PCM.
public struct AudioFormat: Hashable, Sendable, Codable {
    public var sampleRate: Int
    public var channels: Int
    public init(sampleRate: Int, channels: Int) { self.sampleRate = sampleRate; self.channels = channels }
    /// Time of sample `m` relative to sample 0, in ns, rounded to nearest.
    public func sampleTime(_ m: Int64) -> Nanos { rescale(m, nanosPerSecond, Int64(sampleRate)) }
    /// Index of the sample nearest to `t` ns after sample 0.
    public func sampleIndex(at t: Nanos) -> Int64 { rescale(t, Int64(sampleRate), nanosPerSecond) }
}
