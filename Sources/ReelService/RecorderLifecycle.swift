import Logging
import ReelControl
import ReelCore
import ReelStorage

/// The recorder's lifecycle, from a `start` to the end of its recording and to shutdown, and what
/// each ending reports: a value the `Recorder` feeds what happened and whose decisions it performs
/// (it opens the devices, makes and stops the session, logs, publishes, counts and hands files on).
/// No I/O, no threads, no clock: the one time it needs is passed in. It is in ReelService, not
/// ReelCore, because its decisions are in the words of the modules that perform them: `ControlError`
/// (ReelControl), `RecordingLog` and `FinishedFile` (ReelStorage), `ErrorKind` (metrics).
///
/// The rules:
/// - Phases: `idle`, `starting` (a `start` let through: the devices are opened and the file made),
///   `recording`, `stopping` (the pipeline took the stop), then `idle` again once the outcome is
///   taken (`ended`). The recorder runs one `start` or `stop` at a time (its `lifecycle` lock).
/// - One recording at a time: `start` is refused while another one starts, records or stops
///   (naming its file), and from the beginning of shutdown on, also a start that waited for the
///   lock behind the final stop. Nothing is reported of a refusal: the client gets it.
/// - A start that failed (no space, a device, the file) is reported once: logged at error,
///   `lastError`, counted as `start`, an `error` event; the client gets it as `failed`. One whose
///   request cannot be carried out as asked (a bad label, name or cap; the output directory)
///   reports nothing: the client gets why.
/// - A start that succeeded clears `lastError`, and is logged (notice, `started` journal fields).
/// - Each recording's outcome is taken once: the first `ended` for it (the stop's, or the watcher
///   thread's when the pipeline ended by itself) returns what to report, later ones nil. The
///   devices go back to standby when they were its, else they are closed.
/// - What an outcome reports, in this order (`Step`s), then a `state` event:
///   - complete into F: `lastFile` F; the `finished` event; the `finished` line (notice: the
///     segments, length, frames, drops); F handed on (on_finish; `stop` unless the session's
///     hand-off said otherwise).
///   - cut short, kept as F (a failed source: `lastError` "E; the recording was finished early
///     into F"; a failed write: E, which says what was kept): `lastFile` F; a `cut-short` line
///     (error); the error counted (`source`, `storage`) and published; then as complete.
///   - a failed write that kept no finished file (nothing, or a `.part` left to recovery):
///     `lastError` E, `lastFile` the file left; a `failed` line (error); counted as `storage`.
///   - failed (an encoder, the audio backlog, finishing the file): `lastError` E, `lastFile` the
///     file left; a `failed` line (error); counted as `recording`, published as "recording P ended
///     with an error: E"; then a file finished all the same is reported as complete (`finished`).
///   - nothing kept (every take undone): no file; a notice; the `finished` event without a file.
/// - A `stop` is answered from the outcome: the file (complete, or cut short by a source); no file
///   (nothing kept); else `failed` with the error (a failed write's message as it is; otherwise
///   "recording P ended with an error: E"). A stop whose outcome does not come by its deadline is
///   answered `failed`, naming the file and the time waited; the recording stays.
/// - Free space below min_free_mb in the recording's directory, while it is not stopping: logged
///   at error, `lastError`, counted as `low_space`, published, and the recording is stopped.
/// - Standby: each new failure of the warm devices becomes `lastError` and an `error` event
///   (`source`) once; the same failure again is not reported.
/// - Shutdown: from then on every `start` is refused; a recording is stopped, also the one a start
///   under way makes (the stop waits for the start); the shutdown is over once the lifecycle is
///   quiet (`isQuiet`: no start under way, no recording, every ending reported), so a recording
///   ending by itself meanwhile (a failed source, the cap) is waited for too.
struct RecorderLifecycle: Hashable, Sendable {
    /// A recording as the lifecycle knows it (the session itself is the recorder's).
    struct Recording: Hashable, Sendable {
        let id: Int
        /// The `.part` it is recorded into and the final name.
        let part: String
        let final: String
        /// Its output directory and min_free_mb in bytes (0: no check).
        let dir: String
        let minFreeBytes: Int64
        /// Its devices are the standby's.
        let warm: Bool
    }

    enum Phase: Hashable, Sendable {
        case idle
        case starting
        case recording(Recording)
        case stopping(Recording)
    }

    /// One thing the recorder does, in the order given.
    enum Step: Equatable, Sendable {
        /// A log line, with its journal fields.
        case log(Logger.Level, String, Logger.Metadata?)
        /// Counted in `reel_errors_total{kind}` and published as an `error` event.
        case error(String, ErrorKind)
        /// The `finished` event (nil: nothing was kept).
        case finished(file: String?)
        /// To on_finish (`Handoff.handOn`).
        case handOn(FinishedFile)
        /// Stop the recording (on a thread of its own).
        case stop
    }

    /// What is known of an ended recording besides its outcome.
    struct EndFacts: Equatable, Sendable {
        /// The file the session finished and placed, if any (`RecordingSession.handedOff`).
        var handedOff: FinishedFile?
        /// The first of the final file and the `.part` that exists, if any.
        var leftover: String?
        var segments = 0
        var recordedNs: Nanos = 0
        var frames: Int64 = 0
        var droppedFrames: Int64 = 0
    }

    /// What to do with an ended recording.
    struct End: Equatable, Sendable {
        let recording: Recording
        /// Give the devices back to standby (they were its), else close them.
        let giveBack: Bool
        let steps: [Step]
    }

    /// A stop's answer: success with the finished file (nil: none, nothing was kept), or an error.
    enum StopAnswer: Equatable, Sendable {
        case ok(file: String?)
        case error(ControlError)
    }

    private(set) var phase: Phase = .idle
    /// Shutdown has begun.
    private(set) var closing = false
    /// Endings taken and not yet reported (`reported`).
    private(set) var reporting = 0
    /// For `status`.
    private(set) var lastFile: String?
    private(set) var lastError: String?
    /// The last standby failure reported.
    private var standbyFailure: String?
    private var lastID = 0

    /// The recording under way (recording or stopping).
    var recording: Recording? {
        switch phase {
        case let .recording(r), let .stopping(r): return r
        case .idle, .starting: return nil
        }
    }

    /// Idle, and every ending reported: shutdown may end.
    var isQuiet: Bool { phase == .idle && reporting == 0 }

    // MARK: Start

    /// A `start` asks to go ahead: nil (now `starting`), or the refusal.
    mutating func startAsked() -> ControlError? {
        if closing { return .wrongState("cannot start: reeld is shutting down (start it again, e.g. 'systemctl start reeld')") }
        switch phase {
        case .idle: phase = .starting; return nil
        case .starting: return .wrongState("cannot start: another start is under way (try again in a moment)")
        case let .recording(r), let .stopping(r):
            return .wrongState("cannot start: already recording \(r.part) (run 'reelctl stop' first)")
        }
    }

    /// The start could not be carried out as asked (the client gets `error`): idle again.
    mutating func startRefused(_ error: ControlError) -> ControlError {
        if phase == .starting { phase = .idle }
        return error
    }

    /// The start failed: idle again; what to report, and the client's answer. `journal`: the file
    /// it was to record, when it got that far.
    mutating func startFailed(_ message: String, journal: (file: String, part: String)? = nil) -> (steps: [Step], answer: ControlError) {
        if phase == .starting { phase = .idle }
        lastError = message
        let fields = journal.map { RecordingLog.fields(.failed, file: $0.file, part: $0.part) }
        return ([.log(.error, message, fields), .error(message, .start)], .failed(message))
    }

    /// The session is made and started: `recording`. Returns it (its id is new), and the line to
    /// log. Only after `startAsked` let the start through (the recorder's `lifecycle` lock).
    mutating func started(part: String, final: String, dir: String, minFreeBytes: Int64, warm: Bool,
                          video: String, audio: String) -> (recording: Recording, steps: [Step]) {
        precondition(phase == .starting, "a recording started without a start let through (\(phase)): a bug in reeld")
        lastID += 1
        let r = Recording(id: lastID, part: part, final: final, dir: dir, minFreeBytes: minFreeBytes, warm: warm)
        phase = .recording(r)
        lastError = nil
        return (r, [.log(.notice, "recording started: \(part) (video: \(video), audio: \(audio))",
                         RecordingLog.fields(.started, file: final, part: part, segment: 0))])
    }

    // MARK: Stop and the end

    /// A `stop` (a client's, low space, shutdown): the recording to stop, or the refusal.
    func stopAsked() -> Result<Recording, ControlError> {
        guard let r = recording else { return .failure(.wrongState("cannot stop: not recording (state is idle)")) }
        return .success(r)
    }

    /// The pipeline took the stop of `id`.
    mutating func stopAccepted(id: Int) {
        if case let .recording(r) = phase, r.id == id { phase = .stopping(r) }
    }

    /// A stop's answer when the outcome did not come by `deadline` (asked at `asked`).
    static func stopTimedOut(part: String, asked: Nanos, deadline: Nanos) -> ControlError {
        .failed("stopping \(part) did not finish within \(max(0, deadline - asked) / nanosPerSecond) s; the daemon log has details")
    }

    /// A stop's answer, from the outcome of the recording it stopped.
    static func stopAnswer(_ outcome: RecordingOutcome, part: String) -> StopAnswer {
        switch outcome {
        case let .complete(p), let .cutShort(.file(p), .sourceFailed): return .ok(file: p)
        case .nothingKept: return .ok(file: nil)
        case let .cutShort(_, .writeFailed(e)): return .error(.failed(e))  // the message says what was kept
        case let .cutShort(_, .sourceFailed(e)), let .failed(e): return .error(.failed(endedWithError(part, e)))
        }
    }

    private static func endedWithError(_ part: String, _ e: String) -> String { "recording \(part) ended with an error: \(e)" }

    /// Recording `id` ended with `outcome`: idle, and what to report (then `reported`); nil when
    /// it is not the recording under way (its ending was taken already).
    mutating func ended(id: Int, _ outcome: RecordingOutcome, _ facts: EndFacts) -> End? {
        guard let r = recording, r.id == id else { return nil }
        phase = .idle
        reporting += 1
        var steps: [Step] = []
        func finishedInto(_ p: String) {
            lastFile = p
            let segs = facts.segments
            steps += [.finished(file: p),
                      .log(.notice, "recording finished: \(p) (\(segs) segment\(segs == 1 ? "" : "s"), \(formatDuration(facts.recordedNs)), \(facts.frames) frames, \(facts.droppedFrames) dropped)",
                           RecordingLog.fields(.finished, file: p, part: r.part, durationNs: facts.recordedNs,
                                               more: ["REEL_SEGMENTS": "\(segs)", "REEL_FRAMES": "\(facts.frames)",
                                                      "REEL_DROPPED_FRAMES": "\(facts.droppedFrames)"])),
                      .handOn(facts.handedOff ?? FinishedFile(path: p, by: .stop))]
        }
        /// Whatever file the recording left (finished despite the error, or a `.part` to recover).
        func leftBehind() { lastFile = facts.handedOff?.path ?? facts.leftover ?? lastFile }
        switch outcome {
        case let .complete(p):
            finishedInto(p)
        case let .cutShort(.file(p), .writeFailed(e)):
            lastError = e
            steps += [.log(.error, "recording cut short: \(e)", RecordingLog.fields(.cutShort, file: p, part: r.part, more: ["RECORDING": "\(p)"])),
                      .error(e, .storage)]
            finishedInto(p)
        case let .cutShort(.file(p), .sourceFailed(e)):
            let message = "\(e); the recording was finished early into \(p)"
            lastError = message
            steps += [.log(.error, "recording \(p) finished early: \(e)", RecordingLog.fields(.cutShort, file: p, part: r.part)),
                      .error(message, .source)]
            finishedInto(p)
        case let .cutShort(_, .writeFailed(e)):
            lastError = e
            leftBehind()
            steps += [.log(.error, "recording cut short: \(e)", RecordingLog.fields(.failed, file: r.final, part: r.part)),
                      .error(e, .storage)]
        case let .cutShort(_, .sourceFailed(e)), let .failed(e):
            lastError = e
            leftBehind()
            steps += [.log(.error, "recording ended with an error: \(e)", RecordingLog.fields(.failed, file: r.final, part: r.part)),
                      .error(Self.endedWithError(r.part, e), .recording)]
            // Finished into a file all the same (an encoder failed after the last fragment): announced
            // and handed on as any other.
            if let f = facts.handedOff { finishedInto(f.path) }
        case .nothingKept:
            steps += [.log(.notice, "recording stopped with every take undone: no file (\(r.final) was not written)", nil),
                      .finished(file: nil)]
        }
        return End(recording: r, giveBack: r.warm, steps: steps)
    }

    /// An ending's report was performed.
    mutating func reported() { reporting = max(0, reporting - 1) }

    // MARK: Free space, standby, shutdown

    /// Free space measured in `dir` (nil: unknown) while recording `id`. `stopping`: its pipeline
    /// is stopping already (a stop, the cap, a failure).
    mutating func freeSpace(_ free: Int64?, in dir: String, stopping: Bool, of id: Int) -> [Step] {
        guard case let .recording(r) = phase, r.id == id, r.minFreeBytes > 0, !stopping, dir == r.dir,
              let free, free < r.minFreeBytes else { return [] }
        let message = "free space in \(dir) fell to \(Storage.megabytes(free)), below min_free_mb \(r.minFreeBytes / 1_000_000): finishing \(r.part)"
        lastError = message
        return [.log(.error, message, nil), .error(message, .lowSpace), .stop]
    }

    /// Standby's state changed, with its failure (nil: none): what to report, when it is new.
    mutating func standby(failure: String?) -> [Step] {
        defer { standbyFailure = failure }
        guard let failure, failure != standbyFailure else { return [] }
        let message = "standby: \(failure); reeld keeps retrying (check the device)"
        lastError = message
        return [.error(message, .source)]
    }

    /// Shutdown begins: true when there is a recording to stop, or a start under way that is
    /// making one (the stop waits for it).
    mutating func shutdown() -> Bool {
        closing = true
        return phase != .idle
    }
}
