import Foundation
import ReelCore
import ReelSystem
import Synchronization

/// The AAC encoder's own thread. The pipeline thread decides which samples are kept and where
/// silence goes, and hands them over, in order, through an `AudioRing`; this thread runs
/// `consume` on them (RecordingSession's: AAC-encode, write the packets to the locked
/// `MP4Writer`). So AAC no longer runs in series with x264's frame submission on the pipeline
/// thread. In an unpaced run it runs at idle priority, in the gaps x264's threads leave, rather
/// than preempting them: there the audio costs CPU but almost no wall time (docs/PERFORMANCE.md).
///
/// Rules:
/// - `submit` waits while the ring is full: at most as long as this thread takes to encode a
///   piece, since it waits on nothing of the pipeline's. Live capture threads never wait on the
///   pipeline (they drop into a full queue), so a slow encoder cannot stall capture.
/// - `quiesce()` returns once everything submitted has been consumed: until the next `submit`
///   this thread touches nothing, so the pipeline may change what `consume` works on (an undo
///   swaps the encoder and the file). The ring's release/acquire counts and `monitor` order the
///   two threads' writes to it.
/// - A `consume` that throws is the recording's failure: kept, handed once to the pipeline
///   (`takeFailure`), and everything submitted after it is read and dropped, so the pipeline
///   never waits for a dead consumer.
/// - `close()` lets this thread consume everything submitted, then joins it; the caller then owns
///   what `consume` used again (it flushes the encoder itself).
///
/// @unchecked Sendable: `consume` runs only on this thread, between `start()` and the end of
/// `close()`; the ring's two sides are split as `AudioRing` says; the rest is atomic or under `monitor`.
final class AudioEncoderThread: @unchecked Sendable {
    let ring: AudioRing
    private let consume: @Sendable (UnsafeBufferPointer<Int16>) throws -> Void
    private let name: String
    private let priority: NamedThread.Priority
    private let monitor = Monitor()
    // Under `monitor`.
    private var closing = false
    private var started = false
    private var exited = false
    private var failure: (any Error)?
    private var failureTaken = false
    /// Set (release) after `failure`: the pipeline's check each loop is one atomic load.
    private let failed = Atomic<Bool>(false)

    /// `priority` `.idle`: an unpaced run's encoder, which may wait for CPU time x264 leaves
    /// (`NamedThread`); a live recording's is `.normal`, so it keeps up under load.
    /// Unsafe pointer: `consume` is lent the ring's storage for the call only; it must not keep it.
    init(channels: Int, capacityFrames: Int, name: String = "reel-aac", priority: NamedThread.Priority = .normal,
         consume: @escaping @Sendable (UnsafeBufferPointer<Int16>) throws -> Void) {
        ring = AudioRing(channels: channels, capacityFrames: capacityFrames)
        self.consume = consume
        self.name = name
        self.priority = priority
    }

    func start() {
        monitor.withLock { started = true }
        NamedThread.start(name, priority: priority) { [self] in run() }
    }

    /// Pipeline thread: hands `frames` frames over (nil: silence), waiting while the ring is full.
    /// Unsafe pointer: `samples` points at `frames * channels` readable values for this call only.
    func submit(_ samples: UnsafePointer<Int16>?, frames: Int) {
        var done = 0
        while done < frames {
            var n = min(frames - done, ring.room)
            if n == 0 {
                let gone = monitor.withLock { () -> Bool in
                    while ring.room == 0 && !exited { monitor.wait(until: nil) }
                    return exited
                }
                // Only close() ends the thread: nothing consumes any more.
                if gone { return }
                n = min(frames - done, ring.room)
            }
            ring.write(samples.map { $0 + done * ring.channels }, frames: n)
            done += n
            monitor.withLock { monitor.broadcast() }
        }
    }

    /// Pipeline thread: waits until everything submitted has been consumed (see the rules above).
    func quiesce() {
        monitor.withLock {
            while started && !exited && ring.count > 0 { monitor.wait(until: nil) }
        }
    }

    /// Pipeline thread: this thread's failure, once (nil when none, or already taken).
    func takeFailure() -> (any Error)? {
        guard failed.load(ordering: .acquiring) else { return nil }
        return monitor.withLock {
            guard !failureTaken else { return nil }
            failureTaken = true
            return failure
        }
    }

    /// Pipeline thread, at the end: lets this thread consume everything submitted and waits for
    /// it to exit. Throws its failure if it was not taken yet. Idempotent.
    func close() throws {
        monitor.withLock {
            closing = true
            monitor.broadcast()
            while started && !exited { monitor.wait(until: nil) }
        }
        if let e = takeFailure() { throw e }
    }

    private func run() {
        while true {
            let stop = monitor.withLock { () -> Bool in
                while ring.count == 0 && !closing { monitor.wait(until: nil) }
                return ring.count == 0
            }
            if stop { break }
            ring.read { samples in
                guard !failed.load(ordering: .relaxed) else { return }
                do { try consume(samples) } catch { fail(error) }
            }
            monitor.withLock { monitor.broadcast() }
        }
        monitor.withLock { exited = true; monitor.broadcast() }
    }

    private func fail(_ error: any Error) {
        monitor.withLock { if failure == nil { failure = error } }
        failed.store(true, ordering: .releasing)
    }
}
