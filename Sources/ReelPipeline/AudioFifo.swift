/// Interleaved S16 samples waiting for the timeline to decide them: a ring allocated once.
/// Owned by the pipeline thread only. It also knows which of its frames are silence filled in
/// for samples a device lost (`markGap`), so the output can fade around them (`run(upTo:)`).
struct AudioFifo: ~Copyable {
    let channels: Int
    let capacity: Int            // in frames
    // Unsafe pointer: one allocation owned by this non-copyable value, freed in deinit.
    private let ring: UnsafeMutablePointer<Int16>
    private var head = 0         // frame index of the oldest sample
    private(set) var count = 0   // frames held
    /// Frames ever appended and ever removed (the absolute positions of `gaps`).
    private(set) var appended: Int64 = 0
    private var removed: Int64 = 0
    /// Filled-in ranges [start, end) not yet removed, oldest first; at most `maxGaps` (more are
    /// forgotten: their frames pass as kept silence, without the fades).
    private var gaps: [(start: Int64, end: Int64)] = []
    private static let maxGaps = 64

    init(channels: Int, capacityFrames: Int) {
        self.channels = channels
        capacity = capacityFrames
        ring = .allocate(capacity: capacityFrames * channels)
        ring.initialize(repeating: 0, count: capacityFrames * channels)
        gaps.reserveCapacity(Self.maxGaps)
    }
    deinit { ring.deallocate() }

    var room: Int { capacity - count }

    /// Appends `frames` frames (or silence when `src` is nil). The caller checks `room` first.
    mutating func append(_ src: UnsafePointer<Int16>?, frames: Int) {
        precondition(frames <= room, "audio FIFO overflow")
        ring.ringWrite(capacity: capacity, channels: channels, at: head + count, from: src, frames: frames)
        count += frames
        appended += Int64(frames)
    }

    /// The frames appended since `from` (an earlier `appended`) are silence filled in for samples
    /// a device lost.
    mutating func markGap(from: Int64) {
        guard appended > from else { return }
        if let last = gaps.last, last.end == from { gaps[gaps.count - 1].end = appended; return }
        guard gaps.count < Self.maxGaps else { return }
        gaps.append((from, appended))
    }

    /// The oldest frames, up to `limit`, that are all filled in or all not: how many, and which.
    func run(upTo limit: Int) -> (frames: Int, gap: Bool) {
        guard let g = gaps.first else { return (limit, false) }
        if removed < g.start { return (Int(min(Int64(limit), g.start - removed)), false) }
        return (Int(min(Int64(limit), g.end - removed)), true)
    }

    private mutating func forget(_ n: Int) {
        removed += Int64(n)
        while let g = gaps.first, g.end <= removed { gaps.removeFirst() }
    }

    /// Hands the oldest `frames` frames to `body` in at most two contiguous pieces and removes them.
    mutating func consume(_ frames: Int, _ body: (UnsafeBufferPointer<Int16>) throws -> Void) rethrows {
        precondition(frames <= count, "audio FIFO underflow")
        try UnsafePointer(ring).ringRead(capacity: capacity, channels: channels, at: head, frames: frames) {
            try body($0)
            let n = $0.count / channels
            head = (head + n) % capacity; count -= n
            forget(n)
        }
    }

    mutating func discard(_ frames: Int) {
        precondition(frames <= count, "audio FIFO underflow")
        head = (head + frames) % capacity; count -= frames
        forget(frames)
    }
}

/// The last `frames` frames of interleaved audio given to the encoder, in a ring (preallocated:
/// appending never allocates). `last()` copies them out in order (once per take, not per chunk).
struct AudioHistory {
    private var ring: [Int16]
    let channels: Int
    private var write = 0      // next value index
    private var count = 0      // values held

    init(channels: Int, frames: Int) {
        self.channels = channels
        ring = [Int16](repeating: 0, count: channels * frames)
    }

    mutating func append(_ s: UnsafeBufferPointer<Int16>) {
        let cap = ring.count
        guard cap > 0 else { return }
        let src = s.count > cap ? UnsafeBufferPointer(rebasing: s[(s.count - cap)...]) : s
        ring.withUnsafeMutableBufferPointer { r in
            var i = 0
            while i < src.count {
                let n = min(cap - write, src.count - i)
                // Safe: write + n <= cap and i + n <= src.count.
                (r.baseAddress! + write).update(from: src.baseAddress! + i, count: n)
                write = (write + n) % cap
                i += n
            }
        }
        count = min(cap, count + src.count)
    }

    /// What is held, oldest first (in an array of exactly that size: takes keep these).
    func last() -> [Int16] {
        guard count > 0 else { return [] }
        let start = (write - count + ring.count) % ring.count
        if start + count <= ring.count { return Array(ring[start..<(start + count)]) }
        var out = [Int16]()
        out.reserveCapacity(count)
        out.append(contentsOf: ring[start...])
        out.append(contentsOf: ring[..<write])
        return out
    }

    /// Copies what is held, oldest first, into `dst` from index `at` (room for the ring's size
    /// there); returns the frames copied. Allocates nothing.
    func copyLast(into dst: inout [Int16], at: Int) -> Int {
        guard count > 0 else { return 0 }
        let start = (write - count + ring.count) % ring.count
        ring.withUnsafeBufferPointer { r in
            dst.withUnsafeMutableBufferPointer { d in
                for i in 0..<count { d[at + i] = r[(start + i) % r.count] }
            }
        }
        return count / channels
    }

    mutating func clear() { write = 0; count = 0 }
}
