import Synchronization

/// Interleaved S16 frames passed from one producer thread (the pipeline) to one consumer thread
/// (`AudioEncoderThread`): a ring allocated once, lock-free on the data path. `written` and
/// `taken` are running frame counts (Int never wraps in practice: 2^63 frames); slot = count % capacity.
/// @unchecked Sendable: the producer touches only slots in [written, taken + capacity) and then
/// publishes `written` (release); the consumer touches only [taken, written) and then publishes
/// `taken` (release); each loads the other's count with acquire, so no slot is used by both at once.
final class AudioRing: @unchecked Sendable {
    let channels: Int
    /// In frames.
    let capacity: Int
    // Unsafe pointer: one allocation for the ring's life, freed in deinit; split between the sides as above.
    private let storage: UnsafeMutablePointer<Int16>
    private let written = Atomic<Int>(0)
    private let taken = Atomic<Int>(0)

    init(channels: Int, capacityFrames: Int) {
        precondition(channels > 0 && capacityFrames > 0, "AudioRing needs at least one channel and one frame")
        self.channels = channels
        capacity = capacityFrames
        storage = .allocate(capacity: capacityFrames * channels)
        storage.initialize(repeating: 0, count: capacityFrames * channels)
    }
    deinit { storage.deallocate() }

    /// Frames held. Each side's view is safe for itself: the producer may miss frees (less room), the consumer writes (less to read).
    var count: Int { written.load(ordering: .acquiring) - taken.load(ordering: .acquiring) }

    /// Producer: frames that can be written now.
    var room: Int { capacity - (written.load(ordering: .relaxed) - taken.load(ordering: .acquiring)) }

    /// Producer: appends `frames` frames (nil: silence). Returns false, writing nothing, when
    /// there is not room for all of them.
    @discardableResult
    func write(_ src: UnsafePointer<Int16>?, frames: Int) -> Bool {
        let w = written.load(ordering: .relaxed)
        guard frames <= capacity - (w - taken.load(ordering: .acquiring)) else { return false }
        storage.ringWrite(capacity: capacity, channels: channels, at: w, from: src, frames: frames)
        written.store(w + frames, ordering: .releasing)
        return true
    }

    /// Consumer: hands up to `maxFrames` of the oldest frames to `body` in at most two contiguous
    /// pieces, then frees them (also when `body` throws: what it was given counts as consumed).
    /// Returns the frames consumed.
    @discardableResult
    func read(maxFrames: Int = .max, _ body: (UnsafeBufferPointer<Int16>) throws -> Void) rethrows -> Int {
        let r = taken.load(ordering: .relaxed)
        let total = min(maxFrames, written.load(ordering: .acquiring) - r)
        var done = 0
        defer { taken.store(r + done, ordering: .releasing) }
        try UnsafePointer(storage).ringRead(capacity: capacity, channels: channels, at: r, frames: total) {
            done += $0.count / channels
            try body($0)
        }
        return total
    }
}

/// The wrap-around copies of the two sample rings (`AudioFifo`, `AudioRing`), in frames of
/// `channels` interleaved values, over storage of `capacity` frames; `start` is taken modulo it.
/// Unsafe pointer: `self` points at `capacity * channels` values the caller owns.
extension UnsafeMutablePointer where Pointee == Int16 {
    /// Writes `frames` frames (nil: silence) from frame `start` on, wrapping at the end.
    func ringWrite(capacity: Int, channels: Int, at start: Int, from src: UnsafePointer<Int16>?, frames: Int) {
        var done = 0
        while done < frames {
            let slot = (start + done) % capacity
            let n = min(frames - done, capacity - slot)
            let dst = self + slot * channels
            if let src { dst.update(from: src + done * channels, count: n * channels) }
            else { dst.update(repeating: 0, count: n * channels) }
            done += n
        }
    }
}

extension UnsafePointer where Pointee == Int16 {
    /// Hands `frames` frames from frame `start` on to `body` in at most two contiguous pieces.
    func ringRead(capacity: Int, channels: Int, at start: Int, frames: Int,
                  _ body: (UnsafeBufferPointer<Int16>) throws -> Void) rethrows {
        var done = 0
        while done < frames {
            let slot = (start + done) % capacity
            let n = min(frames - done, capacity - slot)
            done += n
            try body(UnsafeBufferPointer(start: self + slot * channels, count: n * channels))
        }
    }
}
