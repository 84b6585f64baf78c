internal import CFFmpeg
internal import ReelFFmpeg
import ReelCore

/// S16 interleaved in, S16 interleaved out at the same nominal rate, with libswresample's soft
/// compensation: `delta` extra (or, negative, fewer) output samples spread over `distance` output
/// samples. The drift lock drives it so that a sound card whose crystal is off by some ppm comes
/// out locked to CLOCK_MONOTONIC. Output goes to a buffer allocated once.
public final class DriftResampler {
    public let format: AudioFormat
    private let swr: Resampler
    // Owned output buffer (deinit), room for `capacity` frames.
    private let out: UnsafeMutablePointer<Int16>
    private let capacity: Int
    /// Silence for samples the source lost, fed in pieces of at most `silenceFrames`.
    private let zeros: [Int16]
    private let silenceFrames = 4800
    /// Output frames produced so far.
    public private(set) var produced: Int64 = 0

    public init(format: AudioFormat) throws {
        let what = "cannot set up audio drift compensation (\(format.sampleRate) Hz, \(format.channels) ch)"
        self.format = format
        var outLayout = AVChannelLayout(), inLayout = AVChannelLayout()
        ChannelLayout.set(&outLayout, channels: format.channels)
        ChannelLayout.set(&inLayout, channels: format.channels)
        var p: OpaquePointer? = nil
        try checkAV(swr_alloc_set_opts2(&p, &outLayout, AV_SAMPLE_FMT_S16, Int32(format.sampleRate),
                                        &inLayout, AV_SAMPLE_FMT_S16, Int32(format.sampleRate), 0, nil), what)
        guard let p else { throw MediaError("\(what): libswresample returned no context") }
        swr = Resampler(p)
        try checkAV(swr_init(p), what)
        // Turn the resampler on now (compensation needs it) so its delay is constant from the start.
        try checkAV(swr_set_compensation(p, 0, Int32(format.sampleRate)), what)
        capacity = format.sampleRate  // one second per call at most; longer input is split
        out = .allocate(capacity: capacity * format.channels)
        zeros = [Int16](repeating: 0, count: silenceFrames * format.channels)
    }
    deinit { out.deallocate() }

    /// Where the next input sample will come out: frames produced plus frames inside the filter.
    public var outputPosition: Int64 { produced + swr_get_delay(swr.p, Int64(format.sampleRate)) }

    public func setCompensation(delta: Int, distance: Int) throws {
        try checkAV(swr_set_compensation(swr.p, Int32(delta), Int32(distance)), "cannot set audio drift compensation")
    }

    /// Resamples `input` (interleaved frames) and hands the output to `emit` (valid during the call).
    /// A nil `input` of `silentFrames` frames resamples silence (samples the source lost).
    public func process(_ input: UnsafeBufferPointer<Int16>?, silentFrames: Int = 0,
                        _ emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        let ch = format.channels
        var left = input.map { $0.count / ch } ?? silentFrames
        var offset = 0
        while left > 0 {
            // Keep each call's output well inside the buffer (compensation is at most a few ppm).
            let n = min(left, capacity / 2, input == nil ? silenceFrames : Int.max)
            try zeros.withUnsafeBufferPointer { z in
                // Safe: `src` points at n*ch readable samples; swr reads exactly n frames from it.
                _ = try convert(input.map { $0.baseAddress! + offset * ch } ?? z.baseAddress!, frames: n, emit)
            }
            left -= n; offset += n
        }
    }

    /// The source has ended: hands the samples still inside the filter (`outputPosition - produced`,
    /// about 16 frames) to `emit`. Without this, the last real samples of a file would be replaced
    /// by the silence that completes the recording. Nothing may be processed after it.
    public func flush(_ emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        while try convert(nil, frames: 0, emit) > 0 {}
    }

    /// One swr_convert of `frames` frames from `src` (nil, 0: drain the filter) into `out`; what
    /// came out is counted and handed to `emit`. Returns the frames that came out.
    /// Unsafe pointers: `src` is read for exactly `frames` frames; swr writes at most `capacity`
    /// frames into `out` (allocated for that).
    private func convert(_ src: UnsafePointer<Int16>?, frames: Int,
                         _ emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws -> Int32 {
        var inPlane: UnsafePointer<UInt8>? = src.map { UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self) }
        var outPlane: UnsafeMutablePointer<UInt8>? = UnsafeMutableRawPointer(out).assumingMemoryBound(to: UInt8.self)
        // A nil input array (not an array holding nil) is what makes swr drain its filter.
        let rc = src == nil ? swr_convert(swr.p, &outPlane, Int32(capacity), nil, 0)
                            : swr_convert(swr.p, &outPlane, Int32(capacity), &inPlane, Int32(frames))
        let got = try checkAV(rc, src == nil ? "audio drift compensation failed at the end" : "audio drift compensation failed")
        produced += Int64(got)
        if got > 0 { try emit(UnsafeBufferPointer(start: out, count: Int(got) * format.channels)) }
        return got
    }
}
