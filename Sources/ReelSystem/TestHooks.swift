import Foundation
import Glibc

/// Test-only hooks, enabled by environment variables that only the test suite sets.
/// Nothing here runs unless the variable is present.
public enum TestHooks {
    /// `REEL_TEST_FREEZE_CAPTURE=PATH` (test-only): once the file PATH exists, the first
    /// capture thread to deliver (video if there is video) blocks inside delivery until the
    /// recording closes, like a driver stuck in a read, so the watchdog's pings stop.
    public static let freezeCaptureVariable = "REEL_TEST_FREEZE_CAPTURE"
    package static let freezeCapturePath: String? = {
        let v = ProcessInfo.processInfo.environment[freezeCaptureVariable]
        return (v?.isEmpty ?? true) ? nil : v
    }()

    package static func freezeRequested() -> Bool {
        guard let p = freezeCapturePath else { return false }
        return access(p, F_OK) == 0
    }

    /// `REEL_TEST_FINISH_STOP_AFTER=parse|moov|mdat` (test-only): MP4Finisher ends the process with
    /// _exit(99) right after that step of finishing a file, as if it were killed there.
    public static let finishStopAfterVariable = "REEL_TEST_FINISH_STOP_AFTER"
    package static let finishStopAfter: String? = {
        let v = ProcessInfo.processInfo.environment[finishStopAfterVariable]
        return (v?.isEmpty ?? true) ? nil : v
    }()
}
