import Foundation
import ReelCore
import ReelSystem
import Synchronization

/// The AAC encoder's own thread. The pipeline thread decides which samples are kept, which are
/// dropped and where silence goes, and hands them over, in order, as `AudioItem`s: the samples
/// through an `AudioRing`, each run's kind and length (and the rare commands: a take begins, an
/// undo, the end) through a `RunRing` beside it. This thread runs `consume` on them, in that
/// order (RecordingSession's: its `AudioOutput`, which crossfades the joins, AAC-encodes and
/// writes the packets to the locked `MP4Writer`). So AAC no longer runs in series with x264's frame submission on the pipeline
/// thread. In an unpaced run it runs at idle priority, in the gaps x264's threads leave, rather
/// than preempting them: there the audio costs CPU but almost no wall time (docs/PERFORMANCE.md).
///
/// Rules:
/// - `submit` waits while the ring is full: at most as long as this thread takes to encode a
///   piece, since it waits on nothing of the pipeline's. Live capture threads never wait on the
///   pipeline (they drop into a full queue), so a slow encoder cannot stall capture.
/// - `quiesce()` returns once everything submitted has been consumed: until the next `submit`
///   this thread writes nothing to the file, so the pipeline may cut the file back (an undo)
///   and know no packet of the removed take follows. What `consume` works on stays this
///   thread's: the pipeline changes it only by a command, in the stream's order.
/// - A `consume` that throws is the recording's failure: kept, handed once to the pipeline
///   (`takeFailure`), and everything submitted after it is read and dropped, so the pipeline
///   never waits for a dead consumer.
/// - `close()` lets this thread consume everything submitted (the last item is normally the
///   command that flushes the encoder), then joins it.
///
/// @unchecked Sendable: `consume` runs only on this thread, between `start()` and the end of
/// `close()`; the rings' two sides are split as `AudioRing` says; the rest is atomic or under `monitor`.
final class AudioEncoderThread: @unchecked Sendable {
    let ring: AudioRing
    private let runs: RunRing
    private let consume: @Sendable (AudioItem) throws -> Void
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
    init(channels: Int, capacityFrames: Int, runs: Int = 1024, name: String = "reel-aac", priority: NamedThread.Priority = .normal,
         consume: @escaping @Sendable (AudioItem) throws -> Void) {
        ring = AudioRing(channels: channels, capacityFrames: capacityFrames)
        self.runs = RunRing(capacity: runs)
        self.consume = consume
        self.name = name
        self.priority = priority
    }

    func start() {
        monitor.withLock { started = true }
        NamedThread.start(name, priority: priority) { [self] in run() }
    }

    /// Pipeline thread: hands `frames` kept frames over, waiting while a ring is full.
    /// Unsafe pointer: `samples` points at `frames * channels` readable values for this call only.
    func submit(_ samples: UnsafePointer<Int16>, frames: Int) { submit(.keep, samples, frames: frames) }

    /// Pipeline thread: `frames` frames of silence the output needs (a run without samples).
    func submitSilence(frames: Int) { submitRun(Run(kind: .silence, frames: frames)) }

    /// Pipeline thread: hands `frames` frames of `kind` (`.keep`, `.drop` or `.gap`) over, in pieces that fit the ring.
    /// Unsafe pointer: `samples` points at `frames * channels` readable values for this call only.
    func submit(_ kind: Run.Kind, _ samples: UnsafePointer<Int16>, frames: Int) {
        var done = 0
        while done < frames {
            var n = min(frames - done, ring.room)
            if n == 0 {
                guard waitFor({ ring.room > 0 }) else { return }
                n = min(frames - done, ring.room)
            }
            ring.write(samples + done * ring.channels, frames: n)
            submitRun(Run(kind: kind, frames: n))
            done += n
        }
    }

    /// Pipeline thread: a command, consumed after everything submitted before it.
    func submit(_ command: AudioCommand) { submitRun(Run(kind: .command, frames: 0, command: command)) }

    private func submitRun(_ run: Run) {
        if runs.room == 0 { guard waitFor({ runs.room > 0 }) else { return } }
        runs.push(run)
        monitor.withLock { monitor.broadcast() }
    }

    /// Waits until `ready` or this thread has exited (then returns false: only close() ends the
    /// thread, and nothing consumes any more).
    private func waitFor(_ ready: () -> Bool) -> Bool {
        monitor.withLock {
            while !ready() && !exited { monitor.wait(until: nil) }
            return !exited
        }
    }

    /// Pipeline thread: waits until everything submitted has been consumed (see the rules above).
    func quiesce() {
        monitor.withLock {
            while started && !exited && runs.count > 0 { monitor.wait(until: nil) }
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
                while runs.count == 0 && !closing { monitor.wait(until: nil) }
                return runs.count == 0
            }
            if stop { break }
            let r = runs.peek()
            switch r.kind {
            case .keep, .drop, .gap:
                // The run's samples were written before the run was published.
                ring.read(maxFrames: r.frames) { samples in
                    guard !failed.load(ordering: .relaxed) else { return }
                    let item: AudioItem = r.kind == .keep ? .keep(samples) : r.kind == .drop ? .drop(samples) : .gap(samples)
                    do { try consume(item) } catch { fail(error) }
                }
            case .silence, .command:
                if !failed.load(ordering: .relaxed) {
                    do { try consume(r.command.map { .command($0) } ?? .silence(r.frames)) } catch { fail(error) }
                }
            }
            runs.pop()
            monitor.withLock { monitor.broadcast() }
        }
        monitor.withLock { exited = true; monitor.broadcast() }
    }

    private func fail(_ error: any Error) {
        monitor.withLock { if failure == nil { failure = error } }
        failed.store(true, ordering: .releasing)
    }
}
