/// The `levels` stream's meter: per channel, the peak and RMS of each window of captured audio
/// (50 ms: 2400 samples at 48 kHz), on the audio's own clock. A pure value fed by the audio
/// capture thread; nothing is allocated after `init`.
///
/// Rules:
/// - A window is `sampleRate / 20` sample frames (at least 1) counted as they are captured; it
///   closes at its last sample, whatever the block sizes, so a block may close none, one or several.
/// - A window's time is the capture instant of its first sample (the block's time plus the
///   sample's offset in it at the nominal rate).
/// - Samples lost by the device are not counted (the window waits for captured ones).
/// - Values are dBFS with one decimal (0 is full scale, |-32768|); digital silence is -120.0,
///   and nothing reads lower.
public struct LevelsWindow: Sendable {
    public let sampleRate: Int
    public let channels: Int
    public let windowFrames: Int
    private var peak: [Int32]
    private var sumSquares: [Int64]
    private var count = 0
    private var startNs: Nanos = 0
    /// The last closed window, in dBFS (valid after `feed` reported a close).
    public private(set) var peakDbfs: [Double]
    public private(set) var rmsDbfs: [Double]
    public private(set) var capturedNs: Nanos = 0

    /// dBFS of silence (and the floor).
    public static let silenceDbfs = -120.0

    public init(sampleRate: Int, channels: Int) {
        self.sampleRate = max(1, sampleRate)
        self.channels = max(1, channels)
        windowFrames = max(1, sampleRate / 20)
        peak = [Int32](repeating: 0, count: self.channels)
        sumSquares = [Int64](repeating: 0, count: self.channels)
        peakDbfs = [Double](repeating: Self.silenceDbfs, count: self.channels)
        rmsDbfs = [Double](repeating: Self.silenceDbfs, count: self.channels)
    }

    /// Folds interleaved samples captured from `time` on, starting at sample frame `from` of
    /// the block; returns where it stopped and whether a window closed there (then read
    /// `peakDbfs`, `rmsDbfs`, `capturedNs`, and call again from the returned frame).
    public mutating func feed(_ samples: UnsafeBufferPointer<Int16>, from: Int, time: Nanos) -> (next: Int, closed: Bool) {
        let frames = samples.count / channels
        var f = from
        while f < frames {
            if count == 0 { startNs = time + rescale(Int64(f), nanosPerSecond, Int64(sampleRate)) }
            let base = f * channels
            for c in 0..<channels {
                let v = Int32(samples[base + c])
                let m = Int32(v.magnitude)
                if m > peak[c] { peak[c] = m }
                sumSquares[c] += Int64(v * v)
            }
            count += 1
            f += 1
            if count == windowFrames {
                close()
                return (f, true)
            }
        }
        return (f, false)
    }

    private mutating func close() {
        for c in 0..<channels {
            peakDbfs[c] = Self.dbfs(amplitude: Double(peak[c]))
            rmsDbfs[c] = Self.dbfs(amplitude: (Double(sumSquares[c]) / Double(count)).squareRoot())
            peak[c] = 0
            sumSquares[c] = 0
        }
        capturedNs = startNs
        count = 0
    }

    /// An amplitude (0...32768) in dBFS with one decimal; -120.0 for 0 and anything below.
    public static func dbfs(amplitude: Double) -> Double {
        guard amplitude > 0 else { return silenceDbfs }
        let db = (20 * _log10(amplitude / 32768) * 10).rounded() / 10
        return max(silenceDbfs, db)
    }
}

// Foundation-free log10, as TestSignals' sine.
@inline(__always) private func _log10(_ x: Double) -> Double {
    #if canImport(Glibc)
    return Glibc.log10(x)
    #else
    return Darwin.log10(x)
    #endif
}
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
