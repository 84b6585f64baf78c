import Foundation
import ReelControl
import ReelCore
@testable import ReelService
import ReelSystem
import XCTest

final class ServiceEnvironmentTests: XCTestCase {
    func testWatchdogEnvironment() {
        XCTAssertEqual(WatchdogEnvironment.timeoutNs(environment: ["WATCHDOG_USEC": "10000000"], pid: 42), 10 * nanosPerSecond)
        XCTAssertEqual(WatchdogEnvironment.timeoutNs(environment: ["WATCHDOG_USEC": "500000", "WATCHDOG_PID": "42"], pid: 42), 500_000_000)
        XCTAssertNil(WatchdogEnvironment.timeoutNs(environment: ["WATCHDOG_USEC": "500000", "WATCHDOG_PID": "7"], pid: 42))
        XCTAssertNil(WatchdogEnvironment.timeoutNs(environment: ["WATCHDOG_USEC": "0"], pid: 42))
        XCTAssertNil(WatchdogEnvironment.timeoutNs(environment: [:], pid: 42))
    }

    func testSocketActivationIgnoresAnotherProcessesVariables() throws {
        XCTAssertNil(try SocketActivation.controlSocket(environment: ["LISTEN_PID": "1", "LISTEN_FDS": "1"], pid: 42, unset: false))
        XCTAssertNil(try SocketActivation.controlSocket(environment: [:], pid: 42, unset: false))
        XCTAssertThrowsError(try SocketActivation.controlSocket(environment: ["LISTEN_PID": "42", "LISTEN_FDS": "x"], pid: 42, unset: false))
        XCTAssertThrowsError(try SocketActivation.controlSocket(
            environment: ["LISTEN_PID": "42", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "a:b"], pid: 42, unset: false)) { e in
            XCTAssertTrue("\(e)".contains("none is named 'control'"), "\(e)")
        }
    }

    func testPeerPolicy() {
        let p = PeerPolicy(groupName: "audio", userName: nil, ownUID: 500)
        XCTAssertNil(p.check(PeerCredentials(pid: 1, uid: 0, gid: 0, groups: [])), "root")
        XCTAssertNil(p.check(PeerCredentials(pid: 1, uid: 500, gid: 500, groups: [])), "own uid")
        XCTAssertNil(p.check(PeerCredentials(pid: 1, uid: 40001, gid: 29, groups: [])), "primary group")
        XCTAssertNil(p.check(PeerCredentials(pid: 1, uid: 40001, gid: 40001, groups: [7, 29])), "supplementary group")
        XCTAssertEqual(p.check(PeerCredentials(pid: 1, uid: 40002, gid: 40002, groups: [7])),
                       "uid 40002 may not control reeld: not in group audio (add it with 'usermod -aG audio USER' and log in again, or run as root)")
        let missing = PeerPolicy(groupName: "no-such-group-reel", userName: nil, ownUID: 500)
        XCTAssertEqual(missing.warnings.count, 1)
        XCTAssertNotNil(missing.check(PeerCredentials(pid: 1, uid: 40001, gid: 29, groups: [])))
    }

    func testHealthReportsOnlyStalledThreads() {
        let h = HealthMonitor()
        let a = h.register("pipeline thread")
        let b = h.register("video capture thread")
        let now = SystemClock.now()
        a.beat()
        XCTAssertEqual(h.stalls(now: now, stallNs: nanosPerSecond), [])
        let later = max(a.lastBeat, b.lastBeat) + 3 * nanosPerSecond
        b.beat()
        XCTAssertEqual(h.stalls(now: b.lastBeat + 2 * nanosPerSecond, stallNs: nanosPerSecond).map(\.name).sorted(),
                       ["pipeline thread", "video capture thread"])
        h.unregister(a)
        XCTAssertEqual(h.stalls(now: later, stallNs: nanosPerSecond).map(\.name), ["video capture thread"])
    }
}

final class JournalStreamTests: XCTestCase {
    func testOnlyTheStreamSystemdConnectedCounts() throws {
        let path = NSTemporaryDirectory() + "reel-journal-\(UUID().uuidString)"
        let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd); unlink(path) }
        var st = stat()
        XCTAssertEqual(fstat(fd, &st), 0)
        XCTAssertTrue(JournalStream.isStderr(environment: ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino)"], fd: fd))
        XCTAssertFalse(JournalStream.isStderr(environment: ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino + 1)"], fd: fd))
        XCTAssertFalse(JournalStream.isStderr(environment: ["JOURNAL_STREAM": "garbage"], fd: fd))
        XCTAssertFalse(JournalStream.isStderr(environment: [:], fd: fd))
    }
}
