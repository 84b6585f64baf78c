/// The audio peak status shows: per channel, the largest |sample| of the kept audio over about
/// the last second. A pure value on the caller's clock (`SessionMachine` holds it).
///
/// Rules:
/// - Kept samples are folded into the current bucket (`add`); silence filled in for lost or
///   missing samples is not metered (it is zero anyway).
/// - `read(now:)` gives the peak over the current bucket and the last `buckets` closed ones;
///   a read at least `bucketNs` after the last rotation closes the current bucket, so the window
///   spans `buckets` to `buckets + 1` bucket lengths (1.0 to 1.1 s by default).
/// - Values are 0...32768 (|−32768| is 32768). No allocation after the first read per channel count.
public struct PeakWindow: Sendable {
    public let bucketNs: Nanos
    public let buckets: Int
    private var current: [Int32] = []
    /// Closed buckets, a ring of `buckets` (oldest overwritten).
    private var closed: [[Int32]] = []
    private var next = 0
    private var rotatedAt: Nanos = 0

    public init(bucketNs: Nanos = 100_000_000, buckets: Int = 10) {
        precondition(bucketNs > 0 && buckets > 0)
        self.bucketNs = bucketNs
        self.buckets = buckets
    }

    /// Folds interleaved samples of `channels` channels into the current bucket.
    public mutating func add(_ samples: UnsafeBufferPointer<Int16>, channels: Int) {
        guard channels > 0 else { return }
        if current.count != channels { reset(channels: channels) }
        var i = 0
        while i + channels <= samples.count {
            for c in 0..<channels {
                let v = Int32(Int32(samples[i + c]).magnitude)
                if v > current[c] { current[c] = v }
            }
            i += channels
        }
    }

    /// The per-channel peak over the window (empty before any audio); rotates the bucket when due.
    public mutating func read(now: Nanos, channels: Int) -> [Int32] {
        guard channels > 0 else { return [] }
        if current.count != channels { reset(channels: channels) }
        var peak = current
        for b in closed { for c in 0..<channels { peak[c] = max(peak[c], b[c]) } }
        if now - rotatedAt >= bucketNs {
            closed[next] = current
            next = (next + 1) % buckets
            for c in 0..<channels { current[c] = 0 }
            rotatedAt = now
        }
        return peak
    }

    private mutating func reset(channels: Int) {
        current = [Int32](repeating: 0, count: channels)
        closed = [[Int32]](repeating: current, count: buckets)
        next = 0
    }
}

/// When dropped video frames are worth a line in the journal: as they happen, at most every
/// `intervalNs`, with the count since the last report. Status shows the total; the journal says
/// when. A pure value on the caller's clock.
public struct DropReports: Sendable {
    public let intervalNs: Nanos
    private var reported: Int64 = 0
    private var reportedAt: Nanos?

    public init(intervalNs: Nanos = 10 * nanosPerSecond) { self.intervalNs = intervalNs }

    /// The total dropped so far at `now`: the frames to report (new since the last report, and
    /// the total), or nil when there is nothing new or the last report is too recent.
    public mutating func observe(total: Int64, now: Nanos) -> (new: Int64, total: Int64)? {
        guard total > reported else { return nil }
        if let at = reportedAt, now - at < intervalNs { return nil }
        defer { reported = total; reportedAt = now }
        return (total - reported, total)
    }
}
