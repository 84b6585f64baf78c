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

/// What the AAC thread is handed, in the pipeline's order (see `AudioEncoderThread`).
/// Unsafe pointer: a `.keep` or `.drop` buffer is the ring's storage, lent for the one call.
enum AudioItem {
    /// Samples kept: the output's next frames.
    case keep(UnsafeBufferPointer<Int16>)
    /// Samples decided out (a pause, an undone take): the far side of a join, never output.
    case drop(UnsafeBufferPointer<Int16>)
    /// Kept samples that are silence filled in for samples a device lost (an overrun): output,
    /// with a fade out before and in after, as the sound on their far side was never captured.
    case gap(UnsafeBufferPointer<Int16>)
    /// Frames of silence the output needs (no source samples).
    case silence(Int)
    case command(AudioCommand)
}

/// The pipeline's orders to the AAC thread's `AudioOutput`, in the stream's order.
enum AudioCommand: Sendable, Equatable {
    /// Take `number`'s audio begins with the next kept sample, output sample `start`.
    case beginTake(number: Int, start: Int64)
    /// Take `take` was undone: the file was cut back (the audio continues at packet time
    /// `resume`, nil: no packet of the take reached the file) and the output goes back to
    /// output sample `to`. Take 1: the file was started again.
    case rollBack(take: Int, resume: Int64?, to: Int64)
    /// The recording ends: what is held goes out and the encoder is drained.
    case finish
    /// The recording ends with its audio unwanted (every take undone, a failed write).
    case discard
}

/// One entry of the `RunRing`: a run of `frames` samples of `kind` in the `AudioRing`, or a command.
struct Run: Sendable {
    enum Kind: UInt8, Sendable { case keep, drop, gap, silence, command }
    var kind: Kind
    var frames: Int
    var command: AudioCommand? = nil
}

/// The runs beside an `AudioRing`: a single-producer single-consumer ring allocated once.
/// @unchecked Sendable: as `AudioRing`: the producer writes only the free slots and then
/// publishes `written` (release), the consumer reads only [taken, written) and publishes `taken`.
final class RunRing: @unchecked Sendable {
    let capacity: Int
    // Unsafe pointer: one allocation for the ring's life, freed in deinit; split between the sides as above.
    private let storage: UnsafeMutablePointer<Run>
    private let written = Atomic<Int>(0)
    private let taken = Atomic<Int>(0)

    init(capacity: Int) {
        precondition(capacity > 0, "RunRing needs at least one slot")
        self.capacity = capacity
        storage = .allocate(capacity: capacity)
        storage.initialize(repeating: Run(kind: .silence, frames: 0), count: capacity)
    }
    deinit {
        storage.deinitialize(count: capacity)
        storage.deallocate()
    }

    var count: Int { written.load(ordering: .acquiring) - taken.load(ordering: .acquiring) }
    /// Producer: slots free now.
    var room: Int { capacity - (written.load(ordering: .relaxed) - taken.load(ordering: .acquiring)) }

    /// Producer: appends `run`; the caller checked `room`.
    func push(_ run: Run) {
        let w = written.load(ordering: .relaxed)
        precondition(w - taken.load(ordering: .acquiring) < capacity, "RunRing overflow")
        storage[w % capacity] = run
        written.store(w + 1, ordering: .releasing)
    }

    /// Consumer: the oldest run (the caller checked `count`).
    func peek() -> Run { storage[taken.load(ordering: .relaxed) % capacity] }

    /// Consumer: frees the oldest run.
    func pop() { taken.store(taken.load(ordering: .relaxed) + 1, ordering: .releasing) }
}
