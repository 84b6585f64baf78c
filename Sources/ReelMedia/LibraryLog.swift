internal import CFFmpeg
internal import CFFmpegShim
internal import CX264
internal import CX264Shim
import Synchronization

/// FFmpeg's and x264's own messages, each at its own level: by default both print to stderr
/// with no priority (the journal files them at info, warnings and errors alike); once routed,
/// every line goes to a sink with its syslog priority (the daemon's log handler).
public enum LibraryLog {
    /// syslog priority (2 critical, 3 error, 4 warning, 6 info, 7 debug) of an FFmpeg AV_LOG_* level.
    public static func priority(ffmpegLevel level: Int32) -> Int32 {
        if level <= AV_LOG_FATAL { return 2 }   // AV_LOG_PANIC, AV_LOG_FATAL
        if level <= AV_LOG_ERROR { return 3 }
        if level <= AV_LOG_WARNING { return 4 }
        if level <= AV_LOG_INFO { return 6 }
        return 7                                // AV_LOG_VERBOSE, AV_LOG_DEBUG, AV_LOG_TRACE
    }

    /// syslog priority of an X264_LOG_* level.
    public static func priority(x264Level level: Int32) -> Int32 {
        switch level {
        case X264_LOG_ERROR: return 3
        case X264_LOG_WARNING: return 4
        case X264_LOG_INFO: return 6
        default: return 7                       // X264_LOG_DEBUG
        }
    }

    /// Sends every FFmpeg line (at or above `av_log_set_level`'s level) and the x264 lines of
    /// encoders opened from now on to `sink(priority, text)`. Call once, at start-up.
    public static func route(_ sink: @escaping @Sendable (_ priority: Int32, _ text: String) -> Void) {
        current.withLock { $0 = sink }
        creel_av_log_route { level, line in
            guard let line, let sink = LibraryLog.current.withLock({ $0 }) else { return }
            sink(LibraryLog.priority(ffmpegLevel: level), String(cString: line))
        }
        creel_x264_log_route { level, line in
            guard let line, let sink = LibraryLog.current.withLock({ $0 }) else { return }
            sink(LibraryLog.priority(x264Level: level), String(cString: line))
        }
    }

    /// Back to FFmpeg's default callback (stderr); x264 encoders opened from now on print there too (tests).
    static func unroute() {
        current.withLock { $0 = nil }
        creel_av_log_route(nil)
        creel_x264_log_route(nil)
    }

    private static let current = Mutex<(@Sendable (Int32, String) -> Void)?>(nil)
}
