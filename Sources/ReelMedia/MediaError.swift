internal import CFFmpeg

/// The one error the media layer throws. `message` names what failed and, where there is one, the fix.
public struct MediaError: Error, Equatable, CustomStringConvertible {
    public let message: String
    /// The errno (ENOSPC, EDQUOT, EIO, ...) when a write to the output file failed; nil otherwise.
    public let systemError: Int32?
    public init(_ message: String, systemError: Int32? = nil) { self.message = message; self.systemError = systemError }
    public var description: String { message }
}

/// `av_strerror` text for an FFmpeg return code.
func avErrorText(_ code: Int32) -> String {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 256) { buf in
        // Safe: buf has 256 bytes and av_strerror NUL-terminates within the given size.
        guard let base = buf.baseAddress, av_strerror(code, base, 256) == 0 else { return "FFmpeg error \(code)" }
        return String(cString: base)
    }
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
