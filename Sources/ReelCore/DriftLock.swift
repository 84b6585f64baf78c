/// Keeps an audio stream locked to CLOCK_MONOTONIC when the sound card's crystal runs fast or slow.
///
/// A card at `rate * (1 + P/1e6)` delivers P ppm too many samples per real second; counting them
/// at the nominal rate drifts A/V by P microseconds per second. The pipeline resamples the card's
/// stream (libswresample soft compensation) so that the resampled sample position tracks the
/// capture clock: input sample `m` captured at `t` should come out at position
/// `round((t - anchor) * rate)`. Every chunk, this controller compares that desired position with
/// where the resampler will put it (samples produced + samples still inside the resampler) and
/// asks for the difference to be absorbed over the next second of output — a proportional
/// controller whose steady-state error for a skew of P ppm is P * rate / 1e6 samples (0.3 ms at
/// 300 ppm) and whose time constant is about one second.
///
/// Downstream of the resampler the stream behaves like a perfect card, so the timeline's pause
/// arithmetic stays sample-exact. Pure and integer-only: the pipeline feeds it timestamps.
public struct DriftLock: Sendable {
    public let rate: Int
    /// The largest correction asked for, in ppm of the nominal rate: beyond any real crystal, so a
    /// wild timestamp cannot make the audio audibly speed up or slow down.
    public let maxPpm: Int64
    public private(set) var anchor: Nanos?
    /// The latest position error seen (desired - actual), in samples: for status and tests.
    public private(set) var lastError: Int64 = 0

    public init(rate: Int, maxPpm: Int64 = 2000) {
        precondition(rate > 0 && maxPpm > 0)
        self.rate = rate
        self.maxPpm = maxPpm
    }

    /// The compensation to apply before feeding a chunk whose first sample was captured at
    /// `captureTime`, given that the resampler will place that sample at output position
    /// `outputPosition`. Returns `delta` extra output samples to produce over the next
    /// `distance` output samples (negative: fewer).
    public mutating func compensation(captureTime: Nanos, outputPosition: Int64) -> (delta: Int, distance: Int) {
        if anchor == nil { anchor = captureTime - rescale(outputPosition, nanosPerSecond, Int64(rate)) }
        let desired = rescale(captureTime - anchor!, Int64(rate), nanosPerSecond)
        let error = desired - outputPosition
        lastError = error
        let limit = Int64(rate) * maxPpm / 1_000_000
        return (Int(min(max(error, -limit), limit)), rate)
    }
}
