import Foundation
import ReelControl
import ReelCore
@testable import ReelDaemon
import XCTest

final class ConfigTests: XCTestCase {
    private func file(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "reel-config-\(UUID().uuidString).toml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    private func error(_ path: String?, env: [String: String] = [:], flags: [SettingKey: SettingValue] = [:]) -> String? {
        do { _ = try DaemonSettings.resolve(configPath: path, environment: env, flags: flags); return nil }
        catch { return error.description }
    }

    func testPrecedenceFlagOverEnvironmentOverFileOverDefault() throws {
        let path = try file("crf = 20\nkeyint = 4\npreset = \"fast\"\n")
        let s = try DaemonSettings.resolve(configPath: path, environment: ["REEL_KEYINT": "5", "REEL_PRESET": "slow"],
                                           flags: [.preset: .string("medium")])
        XCTAssertEqual(s.int(.crf), 20)
        XCTAssertEqual(s.origins[.crf], .file(path: path, line: 1))
        XCTAssertEqual(s.int(.keyint), 5)
        XCTAssertEqual(s.origins[.keyint], .environment("REEL_KEYINT"))
        XCTAssertEqual(s.string(.preset), "medium")
        XCTAssertEqual(s.origins[.preset], .flag("--preset"))
        XCTAssertEqual(s.int(.sampleRate), 48000)
        XCTAssertEqual(s.origins[.sampleRate], .defaultValue)
    }

    func testUnknownKeyNamesFileLineAndKey() throws {
        let path = try file("# comment\n\ncrf = 20\nmin_free = 3\n")
        XCTAssertEqual(error(path), "\(path):4: key 'min_free': unknown key (did you mean 'min_free_mb'?); the keys are documented in /etc/reel/reeld.toml")
    }

    func testBadValueAndWrongTypeNameFileLineAndKey() throws {
        let p1 = try file("channels = 9\n")
        XCTAssertEqual(error(p1), "\(p1):1: key 'channels': 9 is out of range (use 1 to 8)")
        let p2 = try file("\nsize = 640\n")
        XCTAssertEqual(error(p2), "\(p2):2: key 'size': expected a string (in quotes), found an integer")
        let p3 = try file("on_finish = [\"upload.sh\"]\n")
        XCTAssertTrue(error(p3)?.hasPrefix("\(p3):1: key 'on_finish': the program 'upload.sh' must be an absolute path") ?? false)
        let p4 = try file("fps = \"0/1\"\n")
        XCTAssertTrue(error(p4)?.hasPrefix("\(p4):1: key 'fps':") ?? false)
    }

    func testSyntaxErrorNamesTheLine() throws {
        let path = try file("crf = 20\nsize = \"640x360\n")
        XCTAssertTrue(error(path)?.hasPrefix("\(path):2: ") ?? false, error(path) ?? "no error")
    }

    func testBadEnvironmentAndFlagValuesNameTheirSource() {
        XCTAssertEqual(error(nil, env: ["REEL_CONFIG": "", "REEL_CRF": "high"]),
                       "invalid environment variable REEL_CRF (key 'crf'): 'high' is not an integer")
        XCTAssertEqual(error(nil, flags: [.logLevel: .string("loud")]),
                       "invalid --log-level: 'loud' is not one of trace, debug, info, notice, warning, error, critical")
    }

    func testMissingExplicitFileIsAnError() {
        XCTAssertTrue(error("/nonexistent/reeld.toml")?.hasPrefix("cannot read config file /nonexistent/reeld.toml") ?? false)
    }

    func testShippedConfigIsValidSetsAndDocumentsEveryKey() throws {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let path = repo.appendingPathComponent("config/reeld.toml").path
        let s = try DaemonSettings.resolve(configPath: path, environment: [:], flags: [:])
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        for k in SettingKey.allCases {
            guard case let .file(_, line?) = s.origins[k] else { return XCTFail("\(k.rawValue) is not set in config/reeld.toml") }
            XCTAssertTrue(lines[line - 2].hasPrefix("#"), "\(k.rawValue) has no comment above it")
            XCTAssertEqual(s.values[k], k.defaultValue, "config/reeld.toml's \(k.rawValue) differs from the built-in default")
        }
    }
}

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

final class StorageTests: XCTestCase {
    private func box(_ type: String, _ payload: Int) -> [UInt8] {
        let n = UInt32(8 + payload)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + Array(type.utf8) + [UInt8](repeating: 0, count: payload)
    }

    func testPlayablePrefixDropsTheIncompleteFragment() throws {
        let path = NSTemporaryDirectory() + "reel-prefix-\(UUID().uuidString).mp4.part"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let head = box("ftyp", 16) + box("moov", 100)
        let frag1 = box("moof", 40) + box("mdat", 1000)
        let cut = box("moof", 40) + Array(box("mdat", 1000).prefix(500))
        FileManager.default.createFile(atPath: path, contents: Data(head + frag1 + cut))
        XCTAssertEqual(try Storage.playablePrefix(path), Int64(head.count + frag1.count))
        // A moof whose mdat never started is dropped too.
        FileManager.default.createFile(atPath: path, contents: Data(head + frag1 + box("moof", 40)))
        XCTAssertEqual(try Storage.playablePrefix(path), Int64(head.count + frag1.count))
        // No movie header: nothing playable.
        FileManager.default.createFile(atPath: path, contents: Data(box("ftyp", 16) + Array(box("moov", 100).prefix(50))))
        XCTAssertNil(try Storage.playablePrefix(path))
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

final class WriteFailureTextTests: XCTestCase {
    func testEachErrnoIsNamedWithWhatWasKeptAndTheFix() {
        let part = "/v/x.mp4.part"
        XCTAssertEqual(WriteFailureText.message(errno: ENOSPC, verb: "writing", part: part, kept: .prefix(micros: 12_466_667, file: "/v/x.mp4"), dir: "/v"),
                       "no space left on device writing /v/x.mp4.part: the disk is full; kept the first 12.5 s as /v/x.mp4 (free space in /v, or lower the bitrate)")
        XCTAssertEqual(WriteFailureText.message(errno: ENOSPC, verb: "writing", part: part, kept: .nothing, dir: "/v"),
                       "no space left on device writing /v/x.mp4.part: the disk is full; nothing could be kept (no fragment was complete), so /v/x.mp4.part was removed (free space in /v, or lower the bitrate)")
        let quota = WriteFailureText.message(errno: EDQUOT, verb: "writing", part: part, kept: .prefix(micros: 40_000, file: "/v/x.mp4"), dir: "/v")
        XCTAssertTrue(quota.hasPrefix("disk quota exceeded writing /v/x.mp4.part: the disk quota of user "), quota)
        XCTAssertTrue(quota.hasSuffix("is used up; kept the first 0.0 s as /v/x.mp4 (free space in /v within the quota, or raise the quota)"), quota)
        XCTAssertEqual(WriteFailureText.message(errno: EIO, verb: "syncing", part: part, kept: .prefix(micros: 3_050_000, file: "/v/x.mp4"), dir: "/v"),
                       "input/output error syncing /v/x.mp4.part: the storage device failed; kept the first 3.1 s as /v/x.mp4 (check the disk and the kernel log (dmesg); record to another disk with --output-dir)")
        XCTAssertTrue(WriteFailureText.message(errno: EROFS, verb: "writing", part: part, kept: .nothing, dir: "/v").hasPrefix("read-only file system writing "))
        XCTAssertTrue(WriteFailureText.message(errno: EFBIG, verb: "writing", part: part, kept: .nothing, dir: "/v").hasPrefix("file too large writing "))
        // Any other errno: the system's words and the directory to check.
        let other = WriteFailureText.message(errno: ENXIO, verb: "writing", part: part, kept: .unknown("it stays as /v/x.mp4.part"), dir: "/v")
        XCTAssertEqual(other, "no such device or address writing /v/x.mp4.part: the file could not be written; it stays as /v/x.mp4.part (check /v and the kernel log (dmesg))")
    }
}
