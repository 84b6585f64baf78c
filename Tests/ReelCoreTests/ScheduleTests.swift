import XCTest
@testable import ReelCore

final class ScheduleTests: XCTestCase {
    func testPauseEveryThirtyForFive() {
        let s = 1_000_000_000 as Nanos
        let sched = Timeline.pauseSchedule(every: 30 * s, length: 5 * s, until: 100 * s)
        XCTAssertEqual(sched.map(\.0), [.pause, .resume, .pause, .resume, .pause, .resume])
        XCTAssertEqual(sched.map(\.1), [30, 35, 60, 65, 90, 95].map { $0 * s })
        // A pause running past the end has no resume.
        XCTAssertEqual(Timeline.pauseSchedule(every: 30 * s, length: 5 * s, until: 62 * s).map(\.1), [30, 35, 60].map { $0 * s })
    }
}

final class ParseSecondsTests: XCTestCase {
    func testExactDecimalSeconds() {
        XCTAssertEqual(parseSeconds("30"), 30_000_000_000)
        XCTAssertEqual(parseSeconds("2.5"), 2_500_000_000)
        XCTAssertEqual(parseSeconds("0.000000001"), 1)
        XCTAssertEqual(parseSeconds(".25"), 250_000_000)
        for bad in ["", "-1", "1.", "1.2.3", "x", "1e3", "0.0000000001"] { XCTAssertNil(parseSeconds(bad), bad) }
    }
}
