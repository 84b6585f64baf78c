import ReelCore
import ReelSystem

/// A fixed set of equally sized buffers handed from a capture thread to the pipeline and back.
/// Preallocated once: no per-frame allocation. When every buffer is in flight the capture
/// thread drops the sample (live) or waits (unpaced); drops are counted by the source.
/// @unchecked Sendable: the free list is guarded by `monitor`; a slot's bytes are only touched
/// by whoever acquired it until it is released.
public final class FramePool: @unchecked Sendable {
    public let slotBytes: Int
    public let slots: Int
    // Unsafe pointer: one allocation for all slots, freed in deinit; slots never overlap.
    private let storage: UnsafeMutableRawPointer
    private var free: [Int]
    private let monitor = Monitor()
    private var closed = false

    public init(slots: Int, slotBytes: Int) {
        self.slots = slots
        self.slotBytes = slotBytes
        storage = UnsafeMutableRawPointer.allocate(byteCount: slots * slotBytes, alignment: 64)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: slots * slotBytes)
        free = Array((0..<slots).reversed())
        free.reserveCapacity(slots)
    }
    deinit { storage.deallocate() }

    public func buffer(_ slot: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: storage + slot * slotBytes, count: slotBytes)
    }
    /// A free slot, or nil at once when none is free.
    public func tryAcquire() -> Int? { monitor.withLock { free.popLast() } }
    /// A free slot, waiting for one; nil once closed.
    public func acquire() -> Int? {
        monitor.withLock {
            while free.isEmpty && !closed { monitor.wait(until: nil) }
            return closed ? nil : free.popLast()
        }
    }
    public func release(_ slot: Int) { monitor.withLock { free.append(slot); monitor.broadcast() } }
    public func close() { monitor.withLock { closed = true; monitor.broadcast() } }
}

extension FramePool {
    /// Slots for a live video source: about one second of frames, so the pipeline can be held up
    /// that long (a busy CPU, a slow disk) before a frame drops, as GStreamer's `queue` holds 1 s;
    /// at least 8, and at most what fits in 64 MiB (1080p YUYV: 15 slots, half a second).
    public static func liveVideoSlots(frameBytes: Int, fps: Rational) -> Int {
        let perSecond = Int((fps.num + fps.den - 1) / max(1, fps.den))
        let cap = max(8, (64 << 20) / max(1, frameBytes))
        return min(max(8, perSecond), cap)
    }
}
