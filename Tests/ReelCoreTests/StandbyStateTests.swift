import XCTest
@testable import ReelCore

/// Standby's decisions on a manual clock: open at once, borrow and give back, a failure while
/// idle refuses `start` with the message and retries with a doubling delay, a device that comes
/// back is warm again, settings that change reopen (at once idle, after the recording lent).
final class StandbyStateTests: XCTestCase {
    let s = nanosPerSecond

    func testOffIsCold() {
        var st = StandbyState(enabled: false, now: 0)
        XCTAssertEqual(st.start(now: 5), .cold)
        XCTAssertFalse(st.openDue(now: 100 * s).open)
        XCTAssertNil(st.statusWord)
    }

    func testOpensAtOnceLendsAndTakesBack() {
        var st = StandbyState(enabled: true, now: 10)
        XCTAssertEqual(st.openDue(now: 10).open, true)
        XCTAssertEqual(st.start(now: 10), .wait)  // an open is due or under way: start waits for it
        st.opening()
        XCTAssertEqual(st.statusWord, "opening")
        st.opened(now: 20)
        XCTAssertEqual(st.phase, .warm(since: 20))
        XCTAssertEqual(st.start(now: 30), .borrow)
        XCTAssertEqual(st.phase, .lent)
        XCTAssertEqual(st.statusWord, "warm")
        XCTAssertFalse(st.isOpen)  // lent: the recording's
        XCTAssertFalse(st.returned(failure: nil, now: 40))
        XCTAssertEqual(st.phase, .warm(since: 40))
    }

    func testFailureWhileIdleRefusesStartAndRetriesWithBackoff() {
        var st = StandbyState(enabled: true, now: 0)
        st.opening(); st.opened(now: 0)
        st.failed("cannot open /dev/video0: no such device", now: 1 * s)
        XCTAssertEqual(st.statusWord, "failed")
        guard case let .refuse(why) = st.start(now: 1 * s) else { return XCTFail("start must be refused") }
        XCTAssertTrue(why.hasPrefix("standby: cannot open /dev/video0: no such device; reeld retries it in 1 s"), why)
        // Retries: 0.5 s, 1 s, 2 s, 4 s, then every 4 s.
        var now = 1 * s
        var delays: [Nanos] = []
        for _ in 0..<6 {
            let due = st.openDue(now: now)
            XCTAssertFalse(due.open)
            delays.append(due.wakeAt! - now)
            now = due.wakeAt!
            XCTAssertTrue(st.openDue(now: now).open)
            st.opening()
            st.failed("cannot open /dev/video0: no such device", now: now)
        }
        XCTAssertEqual(delays, [s / 2, s, 2 * s, 4 * s, 4 * s, 4 * s])
        // Plugged back: the next attempt succeeds, the delays start over.
        now = st.openDue(now: now).wakeAt!
        st.opening(); st.opened(now: now)
        XCTAssertEqual(st.start(now: now), .borrow)
        XCTAssertEqual(st.failures, 0)
    }

    func testFailureWhileLentClosesAndRetriesWhenGivenBack() {
        var st = StandbyState(enabled: true, now: 0)
        st.opening(); st.opened(now: 0)
        XCTAssertEqual(st.start(now: 1), .borrow)
        XCTAssertTrue(st.returned(failure: "camera /dev/video0 failed: no such device", now: 2 * s))
        XCTAssertEqual(st.openDue(now: 2 * s + s / 2).open, true)
    }

    func testReconfigure() {
        var st = StandbyState(enabled: true, now: 0)
        st.opening(); st.opened(now: 0)
        XCTAssertFalse(st.reconfigured(enabled: true, sourcesChanged: false, now: 1))  // same sources: kept
        XCTAssertTrue(st.reconfigured(enabled: true, sourcesChanged: true, now: 2))   // closed, reopened at once
        XCTAssertEqual(st.openDue(now: 2).open, true)
        st.opening(); st.opened(now: 3)
        XCTAssertEqual(st.start(now: 4), .borrow)
        XCTAssertFalse(st.reconfigured(enabled: true, sourcesChanged: true, now: 5))  // lent: after the recording
        XCTAssertTrue(st.returned(failure: nil, now: 6))
        XCTAssertEqual(st.openDue(now: 6).open, true)
        XCTAssertTrue({ st.opening(); st.opened(now: 7); return st.reconfigured(enabled: false, sourcesChanged: false, now: 8) }())
        XCTAssertEqual(st.start(now: 9), .cold)
    }

    func testWhatAStartKeeps() {
        XCTAssertFalse(StandbyState.keepsVideo(capturedAt: 999, start: 1000))
        XCTAssertTrue(StandbyState.keepsVideo(capturedAt: 1000, start: 1000))
        XCTAssertTrue(StandbyState.keepsAudio(capturedAt: 1000 - StandbyState.audioHoldMargin, start: 1000))
        XCTAssertFalse(StandbyState.keepsAudio(capturedAt: 999 - StandbyState.audioHoldMargin, start: 1000))
    }
}
