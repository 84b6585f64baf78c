import ReelCore
import XCTest

@testable import ReelWeb

/// The sign-in throttle on a manual clock (ns).
final class SignInThrottleTests: XCTestCase {
    let ms: Nanos = 1_000_000
    let s: Nanos = 1_000_000_000

    func testTheDelayDoublesFromHalfASecondUpToEight() {
        XCTAssertEqual((0...8).map { SignInThrottle.delay(afterFailures: $0) / ms },
                       [0, 500, 1000, 2000, 4000, 8000, 8000, 8000, 8000])
    }

    func testAFirstAttemptIsCheckedAtOnceAndAWrongOneAnsweredAfterHalfASecond() {
        var t = SignInThrottle()
        XCTAssertEqual(t.admit(client: "a", now: 10 * s), 10 * s)
        XCTAssertEqual(t.failed(client: "a", now: 10 * s), 500 * ms)
        // The next attempt from the same address waits for the answer's delay to pass.
        XCTAssertEqual(t.admit(client: "a", now: 10 * s + 100 * ms), 10 * s + 500 * ms)
        XCTAssertEqual(t.failed(client: "a", now: 10 * s + 500 * ms), 1000 * ms)
        XCTAssertEqual(t.failures(client: "a", now: 11 * s), 2)
    }

    func testParallelGuessesFromOneAddressQueueUp() {
        var t = SignInThrottle()
        for _ in 0..<3 { _ = t.failed(client: "a", now: 0) }  // 3 failures: the next waits 4 s
        let first = t.admit(client: "a", now: 2 * s)
        let second = t.admit(client: "a", now: 2 * s)
        let third = t.admit(client: "a", now: 2 * s)
        XCTAssertEqual(first, 2 * s)  // the 2 s answer delay of the third failure has passed
        XCTAssertEqual(second, first + 4 * s)
        XCTAssertEqual(third, second + 4 * s)
    }

    func testAnotherAddressIsNotSlowedBeforeTheOverallAllowance() {
        var t = SignInThrottle()
        for _ in 0..<5 { _ = t.failed(client: "a", now: 0) }
        XCTAssertEqual(t.admit(client: "b", now: 1 * s), 1 * s)
        XCTAssertEqual(t.failed(client: "b", now: 1 * s), 500 * ms)
    }

    func testGuessingFromManyAddressesSlowsEveryoneDown() {
        var t = SignInThrottle()
        var wait: Nanos = 0
        for i in 0..<(SignInThrottle.overallAllowance + 2) {
            wait = t.failed(client: "10.0.0.\(i)", now: 0)
        }
        // 12 failures overall: 2 past the allowance, 1 s; every new address waits too.
        XCTAssertEqual(wait, 1000 * ms)
        XCTAssertGreaterThan(t.admit(client: "192.168.1.1", now: 0), 0)
    }

    func testSuccessClearsTheAddressAndTheCountsDecayWithTime() {
        var t = SignInThrottle()
        for _ in 0..<4 { _ = t.failed(client: "a", now: 0) }
        XCTAssertEqual(t.failures(client: "a", now: 0), 4)
        XCTAssertEqual(t.failures(client: "a", now: SignInThrottle.decayNs), 3)
        XCTAssertEqual(t.failures(client: "a", now: 4 * SignInThrottle.decayNs), 0)
        XCTAssertEqual(t.admit(client: "a", now: 5 * SignInThrottle.decayNs), 5 * SignInThrottle.decayNs)
        for _ in 0..<4 { _ = t.failed(client: "b", now: 0) }
        t.succeeded(client: "b", now: 1 * s)
        XCTAssertEqual(t.failures(client: "b", now: 1 * s), 0)
        XCTAssertEqual(t.admit(client: "b", now: 1 * s), 1 * s)
    }

    func testRememberedAddressesAreBounded() {
        var t = SignInThrottle()
        for i in 0..<(SignInThrottle.maxClients + 50) {
            let client = "c\(i)"
            _ = t.admit(client: client, now: Nanos(i))
        }
        XCTAssertLessThanOrEqual(t.rememberedClients, SignInThrottle.maxClients + 1)
    }
}
