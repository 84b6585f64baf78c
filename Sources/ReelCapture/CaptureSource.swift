import Foundation
import ReelCore
import ReelSystem

/// What a capture thread hands the pipeline: a filled pool slot and its capture time.
public enum MediaEvent: Sendable {
    /// A video frame in `pool` slot `slot`, captured at `time` (CLOCK_MONOTONIC ns).
    case video(slot: Int, time: Nanos)
    /// `frames` interleaved S16 audio frames in slot `slot`; the first is sample number `sample`
    /// of the source (counting from 0 at its start) and was captured at `time`. A jump in
    /// `sample` means samples were lost; the pipeline fills them with silence.
    case audio(slot: Int, frames: Int, sample: Int64, time: Nanos)
    /// The source failed and stopped (device gone, read error); the recording is finished.
    case sourceFailed(String)
    /// The source has nothing more to deliver (end of a file): its media ends at `at` (the capture
    /// time just past its last frame or sample). The recording stops there.
    case ended(String, at: Nanos, isVideo: Bool)
}

/// Where a capture thread delivers. Live sources must never block: `offer` drops when the
/// pipeline is behind; unpaced sources may wait (`put`).
public protocol MediaSink: Sendable {
    func deliver(_ event: MediaEvent, wait: Bool) -> Bool
    /// Unpaced sources call this before producing the sample at media time `t`: it returns when
    /// the stream may go on, keeping the streams interleaved by timestamp (as a demuxer does) so
    /// that one never races far ahead of the other. Live (paced) sources never call it.
    func awaitTurn(video: Bool, at t: Nanos)
}

extension MediaSink {
    public func awaitTurn(video: Bool, at t: Nanos) {}
}

/// A running capture: a thread that fills `pool` slots and delivers them.
public protocol CaptureSource: AnyObject, Sendable {
    var pool: FramePool { get }
    var description: String { get }
    /// True once the capture thread has exited: nothing more will be delivered.
    var hasExited: Bool { get }
    /// Samples that had to be dropped because the pipeline was behind (no free slot).
    var dropped: Int64 { get }
    func start(at t0: Nanos, sink: any MediaSink)
    func stop()
}

/// Shared thread plumbing for the sources: a stop flag, a counter, a joinable thread.
/// @unchecked Sendable: `stopping` and `dropCount` are guarded by `monitor`; the thread closure
/// owns everything else it touches.
open class CaptureThread: @unchecked Sendable {
    public let pool: FramePool
    private let monitor = Monitor()
    private var stopping = false
    private var dropCount: Int64 = 0
    private var done = true
    private let name: String

    init(pool: FramePool, name: String) { self.pool = pool; self.name = name }

    public var dropped: Int64 { monitor.withLock { dropCount } }
    /// True once the capture thread has exited (stopped, failed, or reached the end of a file).
    public var hasExited: Bool { monitor.withLock { done } }
    var isStopping: Bool { monitor.withLock { stopping } }
    func countDrop() { monitor.withLock { dropCount += 1 } }
    func countDrops(_ n: Int64) { monitor.withLock { dropCount += n } }

    /// Starts the capture thread. `unpaced`: at idle priority (`NamedThread.Priority.idle`), as
    /// nothing is lost when an unpaced source waits; a live one never is.
    func launch(unpaced: Bool = false, _ body: @escaping @Sendable () -> Void) {
        monitor.withLock { done = false; stopping = false }
        NamedThread.start(name, priority: unpaced ? .idle : .normal) { [self] in
            body()
            monitor.withLock { done = true; monitor.broadcast() }
        }
    }
    /// What a synthetic or file source made of one item.
    enum Produced {
        /// Deliver this event (the slot holds the item).
        case deliver(MediaEvent)
        /// The source is done (end of file, read error): deliver this, release the slot, stop.
        case finish(MediaEvent)
    }

    /// The delivery loop of the synthetic and file sources. Paced: sleep until each item's
    /// `dueAt` and never wait for a slot: with none free the item is dropped, counted, and
    /// `skip` moves past it so later items keep their true times. Unpaced: take turns with the
    /// other stream by media time (`turnAt`) and wait for a slot (back-pressure). `produce` fills
    /// the slot with the next item and moves past it.
    func deliveryLoop(paced: Bool, video: Bool, sink: any MediaSink,
                      timing: () -> (dueAt: Nanos, turnAt: Nanos),
                      skip: () -> Void,
                      produce: (_ slot: Int) -> Produced) {
        while !isStopping {
            let (dueAt, turnAt) = timing()
            if paced { SystemClock.sleep(until: dueAt) } else { sink.awaitTurn(video: video, at: turnAt) }
            guard let slot = paced ? pool.tryAcquire() : pool.acquire() else {
                if isStopping { return }
                countDrop(); skip(); continue
            }
            switch produce(slot) {
            case let .finish(event):
                pool.release(slot)
                _ = sink.deliver(event, wait: true)
                return
            case let .deliver(event):
                if !sink.deliver(event, wait: !paced) {
                    pool.release(slot)
                    if isStopping { return }
                    countDrop()
                }
            }
        }
    }

    /// Asks the thread to stop and waits for it to finish (it wakes within one sample period).
    public func stop() {
        monitor.withLock { stopping = true }
        pool.close()
        monitor.withLock { while !done { monitor.wait(until: nil) } }
    }
}
