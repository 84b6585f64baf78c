import CGlibcShim
import Foundation
import Logging
import ReelCore
@testable import ReelStorage
import ReelSystem
import XCTest

private func tempDir(_ what: String) throws -> String {
    let d = FileManager.default.temporaryDirectory.appendingPathComponent("reel-\(what)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
    try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    return d
}

/// The on_finish program as a process: its process group is killed whole at the timeout, and it
/// does not inherit the spawning thread's scheduling policy or negative nice.
final class FinishHookProcessTests: XCTestCase {
    private let logger = Logger(label: "test")

    /// A hook that starts a grandchild which ignores its parent's death (and SIGTERM, SIGHUP),
    /// then waits for it: at on_finish_timeout the grandchild must end with the hook.
    func testTheTimeoutKillsTheHooksWholeProcessGroup() throws {
        let d = try tempDir("hookgroup")
        defer { try? FileManager.default.removeItem(atPath: d) }
        let fifo = "\(d)/x.mp4.pid"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        FinishHook.run(["/bin/sh", "-c", "trap '' HUP TERM; sleep 600 & echo $! > \"$0.pid\"; wait"], file: "\(d)/x.mp4",
                       timeoutNs: nanosPerSecond, logger: logger)
        // The grandchild's pid, through the FIFO (open blocks until the hook opens it to write).
        let rfd = open(fifo, O_RDONLY)
        XCTAssertGreaterThanOrEqual(rfd, 0)
        var buf = [UInt8](repeating: 0, count: 64)
        var got: [UInt8] = []
        while true {
            // Unsafe: read writes at most buf.count bytes into the array's own storage.
            let n = buf.withUnsafeMutableBytes { read(rfd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            got += buf.prefix(n)
        }
        close(rfd)
        let text = String(decoding: got, as: UTF8.self)
        let grandchild = try XCTUnwrap(Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), text)
        defer { kill(grandchild, SIGKILL) }
        let pidfd = creel_pidfd_open(grandchild)
        XCTAssertGreaterThanOrEqual(pidfd, 0, "the grandchild \(grandchild) is gone before the timeout: nothing was tested")
        defer { close(pidfd) }
        FinishHook.waitForRunning(until: SystemClock.now() + 30 * nanosPerSecond, logger: logger)
        // A pidfd polls readable once its process has ended.
        var p = [pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)]
        let ready = poll(&p, 1, 5000)
        XCTAssertEqual(ready, 1, "the hook's grandchild \(grandchild) outlived the hook's timeout by 5 s")
    }

    /// Spawned from a thread at SCHED_BATCH (and, as root, at nice -7, as reeld runs at Nice=-10):
    /// the hook itself runs at SCHED_OTHER (policy 0) and nice 0, read from its /proc/PID/stat.
    func testTheHookDoesNotInheritTheSpawningThreadsPolicyOrNice() throws {
        let d = try tempDir("hookprio")
        defer { try? FileManager.default.removeItem(atPath: d) }
        let file = "\(d)/x.mp4"
        let root = geteuid() == 0
        let spawner = Promise<(policy: Int32, nice: Int32)>()
        NamedThread.start("test-hook-prio") { [logger] in
            var param = sched_param()
            param.sched_priority = 0
            _ = sched_setscheduler(0, 3 /* SCHED_BATCH: not exported by Swift's Glibc */, &param)
            if root { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, -7) }
            let seen = (sched_getscheduler(0), getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
            FinishHook.run(["/bin/sh", "-c", "cat /proc/$$/stat > \"$0.stat\""], file: file, timeoutNs: 30 * nanosPerSecond, logger: logger)
            spawner.fulfill(seen)
        }
        let seen = try XCTUnwrap(spawner.wait(until: SystemClock.now() + 30 * nanosPerSecond))
        FinishHook.waitForRunning(until: SystemClock.now() + 30 * nanosPerSecond, logger: logger)
        XCTAssertEqual(seen.policy, 3, "the spawning thread is not at SCHED_BATCH: nothing was tested")
        if root { XCTAssertEqual(seen.nice, -7, "the spawning thread is not at nice -7: nothing was tested") }
        let stat = try String(contentsOfFile: file + ".stat", encoding: .utf8)
        // Fields after "(comm)": the 3rd of the line first; nice is the 19th, policy the 41st.
        let fields = try XCTUnwrap(stat.range(of: ")", options: .backwards)).upperBound
        let after = stat[fields...].split(separator: " ")
        XCTAssertGreaterThan(after.count, 38, stat)
        XCTAssertEqual(Int(after[38]), 0, "the hook's scheduling policy (0: SCHED_OTHER): \(stat)")
        if root { XCTAssertEqual(Int(after[16]), 0, "the hook's nice: \(stat)") }
    }
}

/// `Handoff`: the marker, the no-replace rename and what a start-up finds left over.
final class HandoffTests: XCTestCase {
    private let logger = Logger(label: "test")

    func testPlaceNeverReplacesAFileOrLinkAtTheFinalName() throws {
        let d = try tempDir("place")
        defer { try? FileManager.default.removeItem(atPath: d) }
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(d)/a.mp4.part", contents: Data("new".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(d)/a.mp4", contents: Data("old".utf8)))
        XCTAssertEqual(symlink("\(d)/elsewhere", "\(d)/a-2.mp4"), 0)  // a dangling link counts as taken
        let f = try Handoff.place(part: "\(d)/a.mp4.part", final: "\(d)/a.mp4", by: .stop, sync: true, logger: logger)
        XCTAssertEqual(f, FinishedFile(path: "\(d)/a-3.mp4", by: .stop))
        XCTAssertEqual(try String(contentsOfFile: "\(d)/a.mp4", encoding: .utf8), "old")
        XCTAssertEqual(try String(contentsOfFile: "\(d)/a-3.mp4", encoding: .utf8), "new")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(d)/elsewhere"))
        // The marker names the file it waits for and says how it was finished; nothing else stays.
        XCTAssertEqual(try String(contentsOfFile: "\(d)/.a-3.mp4.handoff", encoding: .utf8), "stop\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: d).sorted(), [".a-3.mp4.handoff", "a-2.mp4", "a-3.mp4", "a.mp4"])
        Handoff.handOn(f, recovered: false, hook: [], timeoutNs: 0, logger: logger)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(d)/.a-3.mp4.handoff"))
    }

    func testMarkerNamesAndNumberedAlternatives() {
        XCTAssertEqual(Handoff.marker(for: "/v/lecture.mp4"), "/v/.lecture.mp4.handoff")
        XCTAssertEqual(Handoff.finishedName(ofMarker: ".lecture.mp4.handoff"), "lecture.mp4")
        for notOne in [".handoff", "..handoff", "lecture.mp4.handoff", ".lecture.mp4", "...handoff"] {
            XCTAssertNil(Handoff.finishedName(ofMarker: notOne), notOne)
        }
        XCTAssertEqual(Handoff.numbered("/v/lecture.mp4")(1), "/v/lecture-2.mp4")
        XCTAssertEqual(Handoff.numbered("/v/noext")(3), "/v/noext-4")
        XCTAssertEqual(Handoff.numbered("/v/.hidden")(1), "/v/.hidden-2")
    }

    /// What a crash between the rename and the hook leaves: the next start's `resume` runs the
    /// hook for the file once, with REEL_RECOVERED=1 and how it was finished, and removes the
    /// marker; a marker whose file is gone is removed without a hook, a linked one left alone.
    func testResumeHandsOnEachInterruptedFileOnce() throws {
        let d = try tempDir("resume")
        defer { try? FileManager.default.removeItem(atPath: d) }
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(d)/a.mp4.part", contents: Data("a".utf8)))
        _ = try Handoff.place(part: "\(d)/a.mp4.part", final: "\(d)/a.mp4", by: .cap, sync: false, logger: logger)
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(d)/.gone.mp4.handoff", contents: Data("stop\n".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(d)/r.mp4", contents: Data("r".utf8)))
        XCTAssertEqual(symlink("\(d)/a.mp4", "\(d)/.l.mp4.handoff"), 0)
        let ran = "\(d)/ran"
        let hook = ["/bin/sh", "-c", "printf '%s %s %s\\n' \"$0\" \"$REEL_RECOVERED\" \"$REEL_FINISHED_BY\" >> \(ran)"]
        let files = Handoff.resume(in: d, recovered: ["\(d)/r.mp4"], hook: hook, timeoutNs: 30 * nanosPerSecond, logger: logger)
        FinishHook.waitForRunning(until: SystemClock.now() + 30 * nanosPerSecond, logger: logger)
        XCTAssertEqual(files, [FinishedFile(path: "\(d)/a.mp4", by: .cap), FinishedFile(path: "\(d)/r.mp4", by: .recovery)])
        XCTAssertEqual(Set(try String(contentsOfFile: ran, encoding: .utf8).split(separator: "\n")),
                       ["\(d)/a.mp4 1 cap", "\(d)/r.mp4 1 recovery"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: d).sorted(), [".l.mp4.handoff", "a.mp4", "r.mp4", "ran"])
        // Nothing left to hand on: a second start runs nothing.
        XCTAssertEqual(Handoff.resume(in: d, recovered: [], hook: hook, timeoutNs: 30 * nanosPerSecond, logger: logger), [])
    }
}
