import Logging
import ReelMedia

/// FFmpeg's and x264's messages into `logger`, each at its own level (`LibraryLog`). Call once,
/// after `LoggingSystem.bootstrap`.
public enum LibraryLogging {
    public static func route(to logger: Logger) {
        LibraryLog.route { priority, text in
            logger.log(level: ReelLogHandler.level(syslogPriority: priority), "\(text)")
        }
    }
}
