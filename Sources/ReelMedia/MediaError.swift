internal import CFFmpeg
internal import ReelFFmpeg

/// The one error the media layer throws. `message` names what failed and, where there is one, the fix.
public struct MediaError: Error, Equatable, CustomStringConvertible {
    public let message: String
    /// The errno (ENOSPC, EDQUOT, EIO, ...) when a write to the output file failed; nil otherwise.
    public let systemError: Int32?
    public init(_ message: String, systemError: Int32? = nil) { self.message = message; self.systemError = systemError }
    public var description: String { message }
}

/// Throws `MediaError("\(what): <av_strerror>")` when an FFmpeg call returned a negative code.
@discardableResult
func checkAV(_ rc: Int32, _ what: @autoclosure () -> String) throws(MediaError) -> Int32 {
    if rc < 0 { throw MediaError("\(what()): \(avErrorText(rc))") }
    return rc
}

/// FFmpeg's log level is process-wide; the daemon keeps FFmpeg to warnings and errors (its info
/// lines, such as the AAC encoder's "Qavg", are noise in the journal).
public enum FFmpegLog {
    public static func warningsOnly() { av_log_set_level(AV_LOG_WARNING) }
}
