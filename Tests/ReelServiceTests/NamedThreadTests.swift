import Foundation
import Glibc
import XCTest
import ReelSystem

/// Reel's threads carry their names to the kernel, where `top -H`, `perf` and /proc show them,
/// and run at the priority they were started with.
final class NamedThreadTests: XCTestCase {
    /// What a thread started by `NamedThread` sees of itself: its name in /proc and its policy.
    static func seenFrom(_ name: String, _ priority: NamedThread.Priority) -> ThreadView? {
        let seen = Promise<ThreadView>()
        NamedThread.start(name, priority: priority) { seen.fulfill(ThreadView.current()) }
        return seen.wait(until: SystemClock.now() + 10_000_000_000)
    }

    func testAThreadIsNamedForTheKernel() {
        XCTAssertEqual(Self.seenFrom("reel-test-name", .normal)?.comm, "reel-test-name")
        // The kernel keeps 15 bytes of a name.
        XCTAssertEqual(Self.seenFrom("reel-a-name-longer-than-that", .normal)?.comm, "reel-a-name-lon")
    }

    func testAThreadRunsAtThePriorityItWasStartedWith() {
        XCTAssertEqual(Self.seenFrom("reel-test-norm", .normal)?.policy, ThreadView.schedOther)
        XCTAssertEqual(Self.seenFrom("reel-test-idle", .idle)?.policy, ThreadView.schedIdle)
    }
}

/// The calling thread as the kernel describes it.
struct ThreadView: Sendable {
    /// linux/sched.h: SCHED_OTHER 0, SCHED_IDLE 5 (Glibc's module leaves SCHED_IDLE out).
    static let schedOther: Int32 = 0
    static let schedIdle: Int32 = 5
    let comm: String
    let policy: Int32

    static func current() -> ThreadView {
        let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
        return ThreadView(comm: comm.trimmingCharacters(in: .newlines), policy: sched_getscheduler(0))
    }
}
