import Logging
import ReelCore

/// The journal fields of the recording lines, for queries such as
/// `journalctl -u reeld REEL_EVENT=finished -o json` (the stderr lines leave `REEL_*` out: the
/// message says the same in words).
/// - `REEL_EVENT`: started, paused, resumed, finished, failed, cut-short (the file was finished
///   after a failure: a source lost or a write failed; a `finished` line follows), recovered
///   (a crash-left `.part` made playable at start-up), queued (linked into `outbox_dir`;
///   `REEL_OUTBOX_FILE` names the link), outbox-failed (it could not be linked: it stays, not
///   queued), deleted (an uploaded recording removed by `keep_free_mb`; `REEL_FREED_BYTES`).
/// - `REEL_FILE`: the final `.mp4` path; `REEL_PART`: the `.part` it is recorded into.
/// - `REEL_SEGMENT`: the segment begun (started, resumed) or ended (paused), counted from 0 as
///   in `status` and `events`; `REEL_SEGMENTS`: how many a finished file has.
/// - `REEL_DURATION_NS`: media recorded, so far or in the finished file, in integer ns.
public enum RecordingLog {
    public enum Event: String, Sendable {
        case started, paused, resumed, finished, failed, recovered, queued, deleted
        case cutShort = "cut-short"
        case outboxFailed = "outbox-failed"
    }

    public static func fields(_ event: Event?, file: String, part: String? = nil, segment: Int? = nil,
                              durationNs: Nanos? = nil, more: Logger.Metadata = [:]) -> Logger.Metadata {
        var m = more
        if let event { m["REEL_EVENT"] = "\(event.rawValue)" }
        m["REEL_FILE"] = "\(file)"
        if let part { m["REEL_PART"] = "\(part)" }
        if let segment { m["REEL_SEGMENT"] = "\(segment)" }
        if let durationNs { m["REEL_DURATION_NS"] = "\(durationNs)" }
        return m
    }
}
