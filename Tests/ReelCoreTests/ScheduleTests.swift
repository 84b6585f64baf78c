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
