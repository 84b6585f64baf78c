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
        var done = 0
        while done < frames {
            let slot = (w + done) % capacity
            let n = min(frames - done, capacity - slot)
            let dst = storage + slot * channels
            if let src { dst.update(from: src + done * channels, count: n * channels) }
            else { dst.update(repeating: 0, count: n * channels) }
            done += n
        }
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
        while done < total {
            let slot = (r + done) % capacity
            let n = min(total - done, capacity - slot)
            done += n
            try body(UnsafeBufferPointer(start: storage + slot * channels, count: n * channels))
        }
        return total
    }
}
