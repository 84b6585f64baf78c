import XCTest

@testable import ReelControl

/// The control server's connection decisions on a manual clock (ms): idle timeout and which
/// connection gives its slot up when a client arrives at the cap.
final class ClientSlotsTests: XCTestCase {
    func slots(max: Int = 4, idleMs: Int64 = 30_000) -> ClientSlots {
        ClientSlots(limits: ControlLimits(maxClients: max, idleTimeoutMs: idleMs))
    }

    func testAConnectionTimesOutAtTheLimitAndProgressRestartsItsClock() {
        var s = slots()
        s.add(1, nowMs: 1_000)
        s.add(2, nowMs: 2_000)
        XCTAssertEqual(s.nextDeadlineMs(), 31_000)
        XCTAssertEqual(s.expired(nowMs: 30_999), [])
        XCTAssertEqual(s.expired(nowMs: 31_000), [1])
        s.progress(1, nowMs: 31_000)  // it read or was written to just in time
        XCTAssertEqual(s.expired(nowMs: 32_000), [2])
        XCTAssertEqual(s.idleMs(2, nowMs: 32_000), 30_000)
        s.remove(2)
        XCTAssertEqual(s.nextDeadlineMs(), 61_000)
        XCTAssertEqual(s.expired(nowMs: 61_000), [1])
    }

    func testARequestUnderWayAndASubscriberNeverTimeOut() {
        var s = slots()
        s.add(1, nowMs: 0)
        s.add(2, nowMs: 0)
        s.add(3, nowMs: 0)
        s.setBusy(1, true, nowMs: 10)   // a `stop` finishing a long file
        s.subscribed(2)                 // an `events` stream
        XCTAssertEqual(s.expired(nowMs: 10_000_000), [3])
        XCTAssertEqual(s.nextDeadlineMs(), 30_000)
        // Its reply came back: the clock starts again from then.
        s.setBusy(1, false, nowMs: 500_000)
        XCTAssertEqual(s.expired(nowMs: 529_999), [3])
        XCTAssertEqual(s.expired(nowMs: 530_000), [1, 3])
        s.remove(1)
        s.remove(3)
        XCTAssertNil(s.nextDeadlineMs(), "a subscriber alone never times out")
    }

    func testBelowTheCapEveryClientIsAdmitted() {
        var s = slots(max: 2)
        XCTAssertEqual(s.admission(), .admit)
        s.add(1, nowMs: 0)
        XCTAssertEqual(s.admission(), .admit)
        s.add(2, nowMs: 0)
        XCTAssertTrue(s.isFull)
        XCTAssertNotEqual(s.admission(), .admit)
    }

    func testAtTheCapARefusedPeerGivesWayFirstThenTheRequesterIdleLongestThenASubscriber() {
        var s = slots(max: 4)
        s.add(1, nowMs: 0)
        s.subscribed(1)                       // idle longest, but a subscriber
        s.add(2, nowMs: 100)
        s.add(3, nowMs: 200)
        s.add(4, nowMs: 300, forbidden: true) // newest, but not allowed to control reeld
        XCTAssertEqual(s.admission(), .evict(4))
        s.remove(4)
        s.add(5, nowMs: 400)
        s.progress(2, nowMs: 500)             // 2 was active since: 3 is idle longest
        XCTAssertEqual(s.admission(), .evict(3))
        s.remove(3)
        s.add(6, nowMs: 600)
        s.setBusy(2, true, nowMs: 600)
        s.setBusy(5, true, nowMs: 600)
        s.setBusy(6, true, nowMs: 600)
        XCTAssertEqual(s.admission(), .evict(1), "with every requester busy, the subscriber gives way")
    }

    func testEqualIdleTimesEvictTheOldestConnection() {
        var s = slots(max: 3)
        s.add(7, nowMs: 50)
        s.add(3, nowMs: 50)
        s.add(5, nowMs: 50)
        XCTAssertEqual(s.admission(), .evict(3))
    }

    func testWhenEveryConnectionHasARequestUnderWayTheNewClientIsRefused() {
        var s = slots(max: 2)
        s.add(1, nowMs: 0)
        s.add(2, nowMs: 0)
        s.setBusy(1, true, nowMs: 1)
        s.setBusy(2, true, nowMs: 1)
        XCTAssertEqual(s.admission(), .refuse)
        s.setBusy(2, false, nowMs: 2)
        XCTAssertEqual(s.admission(), .evict(2))
    }

    func testLimitsAreClampedToUsableValues() {
        let l = ControlLimits(maxClients: 0, idleTimeoutMs: -5, maxUnsentReplyBytes: 0)
        XCTAssertEqual(l, ControlLimits(maxClients: 1, idleTimeoutMs: 1, maxUnsentReplyBytes: 1))
        XCTAssertEqual(ControlLimits.standard, ControlLimits(maxClients: 256, idleTimeoutMs: 30_000, maxUnsentReplyBytes: 65_536))
    }
}
