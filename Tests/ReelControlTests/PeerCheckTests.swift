import Foundation
import Glibc
import Synchronization
import XCTest

@testable import ReelControl

final class PeerCheckTests: XCTestCase {
    func testRefusedPeerGetsForbiddenWithItsIdAndIsClosedWithoutReachingTheHandler() throws {
        let seen = Mutex<[PeerCredentials]>([])
        let f = try Fixture(authorize: { peer in
            seen.withLock { $0.append(peer) }
            return "uid \(peer.uid) may not control reeld: not in group reel (add it with 'usermod -aG reel USER')"
        })
        let conn = try RawConnection(path: f.path)
        conn.write("{\"v\":1,\"id\":7,\"cmd\":\"start\"}\n")
        let reply = try conn.readReply()
        XCTAssertFalse(reply.ok)
        XCTAssertEqual(reply.id, 7)
        XCTAssertEqual(reply.error?.code, ControlError.Code.forbidden)
        XCTAssertEqual(reply.error?.message, "uid \(getuid()) may not control reeld: not in group reel (add it with 'usermod -aG reel USER')")
        XCTAssertTrue(conn.atEndOfStream(), "a refused client must be disconnected")
        XCTAssertEqual(f.recorder.calls, [], "a refused request reached the handler")
        // The kernel's view of this very process.
        XCTAssertEqual(seen.withLock { $0.first?.pid }, getpid())
        XCTAssertEqual(seen.withLock { $0.first?.uid }, getuid())
        XCTAssertEqual(seen.withLock { $0.first?.gid }, getgid())
    }

    func testAllowedPeerIsServed() throws {
        let f = try Fixture(authorize: { _ in nil })
        let reply = try f.client().send(Request(id: 1, cmd: .status), timeoutMs: 5000)
        XCTAssertTrue(reply.ok)
        XCTAssertEqual(f.recorder.calls, [.status])
    }
}
