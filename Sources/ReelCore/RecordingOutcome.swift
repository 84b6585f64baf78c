/// How a recording ended, as the recorder reports it: complete, cut short (with what was kept and
/// why), or failed.
///
/// The rules (`resolve`):
/// - A failed write or sync outranks everything: the recording is cut short and `kept` says what
///   the file could be cut back to (the message names it too).
/// - Else a pipeline failure (encoder error, audio backlog) fails the recording, as does an error
///   while finishing the file (flush, trailer, rename); the pipeline's failure is the one named.
/// - Else a source that failed cut it short: the finished file holds everything up to the failure.
/// - Else, every take undone: nothing kept, no file.
/// - Else it is complete.
public enum RecordingOutcome: Equatable, Sendable {
    /// Everything asked for is in `file`.
    case complete(file: String)
    /// The recording ended before its stop.
    case cutShort(kept: Kept, reason: CutShortReason)
    /// The recording ended with an error; any file it left is at the paths the recorder knows.
    case failed(String)
    /// Every take was undone before the stop: no file was left (none is wanted).
    case nothingKept

    public enum Kept: Equatable, Sendable {
        /// A finished, playable file (renamed from `.part`) holding the recording up to the cut.
        case file(String)
        /// Nothing could be kept: no fragment was complete, the `.part` was removed.
        case nothing
        /// The file could not be cut back or renamed; it stays at this path for recovery.
        case unrecovered(String)
    }

    public enum CutShortReason: Equatable, Sendable {
        /// A source failed (device gone, read error): what it said, naming the device.
        case sourceFailed(String)
        /// The file could not be written or synced: the whole message, with what was kept and the fix.
        case writeFailed(String)
    }

    /// The finished file, if the recording left one at its final path.
    public var file: String? {
        switch self {
        case let .complete(f), let .cutShort(.file(f), _): return f
        default: return nil
        }
    }

    /// - Parameters:
    ///   - ending: how the pipeline ended.
    ///   - finishError: why finishing the file failed (flush, trailer, rename), if it did.
    ///   - writeFailure: after a failed write or sync, what the file was cut back to and the message.
    ///   - file: the final path the file was renamed to when finishing succeeded.
    public static func resolve(ending: SessionMachine.Ending, finishError: String?,
                               writeFailure: (kept: Kept, message: String)?, file: String) -> RecordingOutcome {
        if let w = writeFailure { return .cutShort(kept: w.kept, reason: .writeFailed(w.message)) }
        if case let .failed(f) = ending { return .failed(f.description) }
        if let finishError { return .failed(finishError) }
        if case let .sourceFailed(msg) = ending { return .cutShort(kept: .file(file), reason: .sourceFailed(msg)) }
        if case .nothingKept = ending { return .nothingKept }
        return .complete(file: file)
    }
}
