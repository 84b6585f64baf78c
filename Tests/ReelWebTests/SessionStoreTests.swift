import ReelCore
import XCTest

@testable import ReelWeb

/// Sessions on a manual clock: 12 h idle expiry, sign-out, the cap, token shape.
final class SessionStoreTests: XCTestCase {
    let h: Nanos = 3600 * 1_000_000_000
    let token = String(repeating: "ab", count: 32)

    func testASessionLivesWhileUsedAndEndsAfterTwelveIdleHours() {
        var store = SessionStore()
        store.open(token, now: 0)
        XCTAssertTrue(store.touch(token, now: 11 * h))
        XCTAssertTrue(store.touch(token, now: 22 * h))  // used at 11 h: its 12 h start again
        XCTAssertFalse(store.touch(token, now: 34 * h))
        XCTAssertFalse(store.touch(token, now: 34 * h + 1))  // gone, not revived
        XCTAssertEqual(store.count, 0)
    }

    func testSignOutEndsTheSessionAndUnknownOrMalformedTokensAreRefused() {
        var store = SessionStore()
        store.open(token, now: 0)
        XCTAssertFalse(store.touch(String(repeating: "cd", count: 32), now: 1))
        XCTAssertFalse(store.touch("", now: 1))
        XCTAssertFalse(store.touch(token.uppercased(), now: 1))
        store.close(token)
        XCTAssertFalse(store.touch(token, now: 1))
    }

    func testNewTokensAre32RandomBytesInHex() {
        let a = SessionStore.newToken(), b = SessionStore.newToken()
        XCTAssertEqual(a.count, 64)
        XCTAssertTrue(SessionStore.wellFormed(a))
        XCTAssertNotEqual(a, b)
        XCTAssertEqual(SessionStore.hex([0, 15, 16, 255]), "000f10ff")
    }

    func testTheOldestSessionGivesWayAtTheCap() {
        var store = SessionStore()
        let tokens = (0..<(SessionStore.maxSessions + 1)).map { _ in SessionStore.newToken() }
        for (i, t) in tokens.enumerated() { store.open(t, now: Nanos(i)) }
        XCTAssertEqual(store.count, SessionStore.maxSessions)
        XCTAssertFalse(store.touch(tokens[0], now: 1000))
        XCTAssertTrue(store.touch(tokens.last!, now: 1000))
    }
}
