import Foundation
import ReelCore
@testable import ReelStorage
import Logging
import ReelSystem
import XCTest

final class WriteFailureTextTests: XCTestCase {
    func testEachErrnoIsNamedWithWhatWasKeptAndTheFix() {
        let part = "/v/x.mp4.part"
        XCTAssertEqual(WriteFailureText.message(errno: ENOSPC, verb: "writing", part: part, kept: .prefix(micros: 12_466_667, file: "/v/x.mp4"), dir: "/v"),
                       "no space left on device writing /v/x.mp4.part: the disk is full; kept the first 12.5 s as /v/x.mp4 (free space in /v, or lower the bitrate)")
        XCTAssertEqual(WriteFailureText.message(errno: ENOSPC, verb: "writing", part: part, kept: .nothing, dir: "/v"),
                       "no space left on device writing /v/x.mp4.part: the disk is full; nothing could be kept (no fragment was complete), so /v/x.mp4.part was removed (free space in /v, or lower the bitrate)")
        let quota = WriteFailureText.message(errno: EDQUOT, verb: "writing", part: part, kept: .prefix(micros: 40_000, file: "/v/x.mp4"), dir: "/v")
        XCTAssertTrue(quota.hasPrefix("disk quota exceeded writing /v/x.mp4.part: the disk quota of user "), quota)
        XCTAssertTrue(quota.hasSuffix("is used up; kept the first 0.0 s as /v/x.mp4 (free space in /v within the quota, or raise the quota)"), quota)
        XCTAssertEqual(WriteFailureText.message(errno: EIO, verb: "syncing", part: part, kept: .prefix(micros: 3_050_000, file: "/v/x.mp4"), dir: "/v"),
                       "input/output error syncing /v/x.mp4.part: the storage device failed; kept the first 3.1 s as /v/x.mp4 (check the disk and the kernel log (dmesg); record to another disk with --output-dir)")
        XCTAssertTrue(WriteFailureText.message(errno: EROFS, verb: "writing", part: part, kept: .nothing, dir: "/v").hasPrefix("read-only file system writing "))
        XCTAssertTrue(WriteFailureText.message(errno: EFBIG, verb: "writing", part: part, kept: .nothing, dir: "/v").hasPrefix("file too large writing "))
        // Any other errno: the system's words and the directory to check.
        let other = WriteFailureText.message(errno: ENXIO, verb: "writing", part: part, kept: .unknown("it stays as /v/x.mp4.part"), dir: "/v")
        XCTAssertEqual(other, "no such device or address writing /v/x.mp4.part: the file could not be written; it stays as /v/x.mp4.part (check /v and the kernel log (dmesg))")
    }
}

final class FinishHookTests: XCTestCase {
    private func tempDir() throws -> String {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("reel-hook-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }

    /// The hook gets stdin, stdout and stderr and no other descriptor of reeld's, even one a
    /// thread opened without O_CLOEXEC (here fd 77, like a socket accepted at that instant).
    func testTheHookInheritsOnlyStdio() throws {
        let d = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: d) }
        let leaked = open("/dev/null", O_RDONLY)  // no O_CLOEXEC
        XCTAssertEqual(dup2(leaked, 77), 77)
        close(leaked)
        defer { close(77) }
        let file = "\(d)/x.mp4"
        FinishHook.run(["/bin/sh", "-c", "ls /proc/self/fd > \"$0.fds\""], file: file, timeoutNs: 30 * nanosPerSecond,
                       logger: Logger(label: "test"))
        FinishHook.waitForRunning(until: SystemClock.now() + 30 * nanosPerSecond, logger: Logger(label: "test"))
        let fds = Set(try String(contentsOfFile: file + ".fds", encoding: .utf8).split(separator: "\n").compactMap { Int($0) })
        // ls's own descriptors: 0-2 and the directory it lists (3).
        XCTAssertEqual(fds, [0, 1, 2, 3], "the hook inherited \(fds.subtracting([0, 1, 2, 3]).sorted())")
    }

    /// At shutdown a hook gets what is left of the budget, whatever on_finish_timeout says.
    func testShutdownKillsAHookStillRunningAtTheDeadline() throws {
        let d = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: d) }
        let t0 = SystemClock.now()
        FinishHook.run(["/bin/sh", "-c", "exec sleep 60"], file: "\(d)/x.mp4", timeoutNs: 86_400 * nanosPerSecond,
                       logger: Logger(label: "test"))
        FinishHook.waitForRunning(until: t0 + 300_000_000, logger: Logger(label: "test"))
        let waited = SystemClock.now() - t0
        XCTAssertGreaterThanOrEqual(waited, 300_000_000, "the hook ended before the deadline: nothing was tested")
        XCTAssertLessThan(waited, 20 * nanosPerSecond, "waited for the hook's own timeout")
    }
}
