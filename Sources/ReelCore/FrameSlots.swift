/// Places video frames on the output frame grid by capture time. Each frame takes the slot
/// nearest its output time; a frame whose nearest slot is already taken is dropped (and counted)
/// rather than pushed to the next slot. Pushing would make every later frame late by a slot, for
/// good: a camera whose clock runs fast against CLOCK_MONOTONIC (vivid under emulation measured
/// +440 ppm) would then be counted, not timed, and drift from the audio without bound; dropping
/// keeps every frame within half a frame of its capture time, at the cost of one frame per slot
/// the camera gains (one in ~2300 at +440 ppm), as GStreamer's `videorate` drops. A camera slow
/// against the clock, or a frame lost, leaves a slot empty: the previous frame lasts two.
public struct FrameSlots: Sendable {
    public let fps: Rational
    public private(set) var lastSlot: Int64? = nil
    /// Frames dropped because their slot was taken.
    public private(set) var collisions = 0

    public init(fps: Rational) { self.fps = fps }

    /// The output was cut back (an undone take): the slots after `lastSlot` are free again
    /// (`lastSlot` is what it was before the removed take's first frame).
    public mutating func rollBack(to lastSlot: Int64?) {
        self.lastSlot = lastSlot
    }

    /// The slot for a frame at output time `out` (ns), or nil: drop it, its slot is taken.
    public mutating func place(_ out: Nanos) -> Int64? {
        let slot = nearest(out)
        if let lastSlot, slot <= lastSlot { collisions += 1; return nil }
        lastSlot = slot
        return slot
    }

    /// Where the output ends (ns) when a frame at output time `out` closes it (a stop's frame,
    /// not placed): the start of the slot it would take, or of the one after the last frame's
    /// when its own is taken. nil before any frame was placed.
    public func end(closedAt out: Nanos) -> Nanos? {
        guard let lastSlot else { return nil }
        return rescale(max(lastSlot + 1, nearest(out)), nanosPerSecond * fps.den, fps.num)
    }

    /// Where the output ends when no frame closes it (a stop resolved at its instant, in a camera
    /// gap): the first slot start at or after `out`, after the last frame's. nil before any frame.
    public func end(atOrAfter out: Nanos) -> Nanos? {
        guard let lastSlot else { return nil }
        let slot = max(lastSlot + 1, rescale(out, fps.num, nanosPerSecond * fps.den, rounding: .up))
        return rescale(slot, nanosPerSecond * fps.den, fps.num)
    }

    private func nearest(_ out: Nanos) -> Int64 { rescale(out, fps.num, nanosPerSecond * fps.den) }
}
