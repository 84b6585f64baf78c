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

    /// `REEL_TEST_STALL_PIPELINE=PATH` (test-only): while the file PATH exists, the recording's
    /// pipeline thread holds before it handles the next item of its queue, as an overloaded
    /// pipeline does: requests wait in the queue unanswered (capture goes on, dropping what the
    /// full queue cannot take).
    public static let stallPipelineVariable = "REEL_TEST_STALL_PIPELINE"
    package static let stallPipelinePath: String? = {
        let v = ProcessInfo.processInfo.environment[stallPipelineVariable]
        return (v?.isEmpty ?? true) ? nil : v
    }()

    package static func pipelineStallRequested() -> Bool {
        guard let p = stallPipelinePath else { return false }
        return access(p, F_OK) == 0
    }

    /// `REEL_TEST_FINISH_STOP_AFTER=parse|moov|mdat` (test-only): MP4Finisher ends the process with
    /// _exit(99) right after that step of finishing a file, as if it were killed there.
    public static let finishStopAfterVariable = "REEL_TEST_FINISH_STOP_AFTER"
    package static let finishStopAfter: String? = {
        let v = ProcessInfo.processInfo.environment[finishStopAfterVariable]
        return (v?.isEmpty ?? true) ? nil : v
    }()

    /// `REEL_TEST_HANDOFF_STOP_AFTER=rename|link` (test-only): the hand-off of a finished file ends
    /// the process with _exit(99), as if reeld were killed there: `rename` right after the rename
    /// and the directory sync (`Handoff.place`), before the outbox link and on_finish; `link` right
    /// after the outbox link and its sync, before the hand-off marker says so (`Handoff.handOn`).
    public static let handoffStopAfterVariable = "REEL_TEST_HANDOFF_STOP_AFTER"
    package static let handoffStopAfter: String? = {
        let v = ProcessInfo.processInfo.environment[handoffStopAfterVariable]
        return (v?.isEmpty ?? true) ? nil : v
    }()

    /// `REEL_TEST_FINISH_HOLD=moov|mdat` (test-only): MP4Finisher, once it has written that step
    /// (the new moov, the mdat header) and before it syncs it, prints `REEL-FINISH-HOLD <step>` on
    /// stderr and blocks for good: the moment for a test to cut the power (the VM tier), when
    /// the step's bytes may or may not have reached the disk.
    public static let finishHoldVariable = "REEL_TEST_FINISH_HOLD"
    package static let finishHold: String? = {
        let v = ProcessInfo.processInfo.environment[finishHoldVariable]
        return (v?.isEmpty ?? true) ? nil : v
    }()

    /// `REEL_TEST_CONTROL_IDLE_MS=N` (test-only): the control server closes idle connections after
    /// N ms instead of 30 s, so a test need not wait half a minute for it.
    public static let controlIdleVariable = "REEL_TEST_CONTROL_IDLE_MS"
    package static let controlIdleMs: Int64? = {
        ProcessInfo.processInfo.environment[controlIdleVariable].flatMap { Int64($0) }.flatMap { $0 > 0 ? $0 : nil }
    }()

    /// Blocks the calling thread for good (REEL_TEST_FINISH_HOLD), after saying so on stderr.
    package static func holdForever(_ what: String) -> Never {
        let line = "REEL-FINISH-HOLD \(what)\n"
        _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
        while true { _ = Glibc.pause() }
    }
}
