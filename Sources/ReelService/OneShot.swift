import Foundation
import Logging
import ReelControl
import ReelCore
import ReelPipeline
import ReelStorage
import ReelSystem

/// `reeld record`: the daemon's pipeline without the socket, for scripts, benchmarks and long
/// unpaced runs. Pauses follow a fixed schedule in source time; the recording stops at
/// `duration` of source time or when a file source ends, whichever comes first.
public enum OneShot {
    /// Records into `output` (written as `output.part`, renamed when complete) and returns the
    /// final path and the last status. `stopNow` lets a signal handler end the run early.
    public static func record(config: RecorderConfig, output: String, duration: Nanos?,
                              pauseEvery: Nanos?, pauseFor: Nanos, logger: Logger) throws -> (String, SessionSnapshot) {
        if FileManager.default.fileExists(atPath: output) {
            throw RecorderFailure("\(output) already exists (Reel never overwrites a recording; remove it or choose another --output)")
        }
        var schedule: [(Timeline.Request, Nanos)] = []
        if let every = pauseEvery {
            schedule += Timeline.pauseSchedule(every: every, length: pauseFor, until: duration ?? Nanos.max / 2)
        }
        if let duration { schedule.append((.stop, duration)) }
        let session = try RecordingSession(config: config, partPath: output + ".part", finalPath: output,
                                           logger: logger, schedule: schedule)
        let stopAsked = current.withLock { state in state.session = session; return state.stopAsked }
        defer { current.withLock { $0.session = nil } }
        session.start()
        // A signal that came before the session existed: it stops the recording at once.
        if stopAsked { _ = session.request(.stop, deadline: Self.signalStopDeadline) }
        logger.notice("recording \(output).part (video: \(session.sourceDescriptions.video ?? "none"), audio: \(session.sourceDescriptions.audio ?? "none"))",
                      metadata: RecordingLog.fields(.started, file: output, part: output + ".part", segment: 0))
        let outcome = session.finished.wait(until: nil)!
        // No on_finish here (a serve-only setting): the hand-off only removes its marker.
        if let f = session.handedOff { Handoff.handOn(f, recovered: false, hook: [], timeoutNs: 0, logger: logger) }
        switch outcome {
        case let .complete(path), let .cutShort(.file(path), .sourceFailed):
            return (path, session.snapshot)
        case let .cutShort(_, .writeFailed(e)):
            // Cut short by a failed write (disk full): the message names what was kept.
            throw RecorderFailure(e)
        case let .cutShort(_, .sourceFailed(e)), let .failed(e): throw RecorderFailure(e)
        case .nothingKept: throw RecorderFailure("every take was undone: no file was left at \(output)")
        }
    }

    /// Ends the one-shot recording early (SIGINT/SIGTERM), at the next frame: it is finished, not
    /// lost. Before the recording exists, it is stopped as soon as it starts.
    public static func stopEarly() {
        let s = current.withLock { state in state.stopAsked = true; return state.session }
        // A second signal is refused as a second stop is: the first is being carried out.
        if let s { _ = s.request(.stop, deadline: signalStopDeadline) }
    }

    /// A signal's stop is never given up on: it stops the recording however long the pipeline takes.
    private static let signalStopDeadline: Nanos = .max / 2

    private static let current = LockedBox<(session: RecordingSession?, stopAsked: Bool)>((nil, false))
}

/// A value behind a lock, for the rare shared state outside the pipeline.
/// @unchecked Sendable: `value` is only touched inside `monitor.withLock`.
final class LockedBox<T>: @unchecked Sendable {
    private let monitor = Monitor()
    private var value: T
    init(_ v: T) { value = v }
    func withLock<R>(_ body: (inout T) -> R) -> R { monitor.withLock { body(&value) } }
}
