import Foundation
import Glibc
@testable import ReelConfig
import XCTest

/// `outbox_dir` and `keep_free_mb` in the setting table, and their checks together and against the
/// file system (`DaemonSettings.outbox`; the outbox itself: ReelStorageTests' OutboxTests).
final class OutboxSettingTests: XCTestCase {
    private func tempDir(in base: String? = nil) throws -> String {
        let d = "\(base ?? NSTemporaryDirectory())/reel-outbox-setting-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }

    func testTheSettingsAndTheirNames() throws {
        XCTAssertEqual(SettingKey.outboxDir.flag, "--outbox-dir")
        XCTAssertEqual(SettingKey.outboxDir.environmentVariable, "REEL_OUTBOX_DIR")
        XCTAssertEqual(SettingKey.keepFreeMB.flag, "--keep-free-mb")
        XCTAssertEqual(SettingKey.keepFreeMB.environmentVariable, "REEL_KEEP_FREE_MB")
        XCTAssertNil(SettingKey.outboxDir.problem(.string("")))
        XCTAssertNil(SettingKey.outboxDir.problem(.string("/var/lib/reel/outbox")))
        XCTAssertNotNil(SettingKey.outboxDir.problem(.string("outbox")))
        XCTAssertNotNil(SettingKey.keepFreeMB.problem(.int(-1)))
        XCTAssertTrue(SettingKey.outboxDir.spec.serveOnly && SettingKey.keepFreeMB.spec.serveOnly)
        let off = DaemonSettings().values
        XCTAssertNil(off.outboxDir, "outbox_dir is off by default")
        XCTAssertEqual(off.keepFreeMB, 0, "keep_free_mb is off by default")
        let s = try DaemonSettings.resolve(configPath: "/dev/null", environment: ["REEL_OUTBOX_DIR": "/srv/box"],
                                           flags: try SettingFlags.parse(["--keep-free-mb", "2000"]))
        XCTAssertEqual(s.values.outboxDir, "/srv/box")
        XCTAssertEqual(s.values.keepFreeMB, 2000)
    }

    func testKeepFreeNeedsAnOutboxAndTheOutboxIsCheckedAgainstOutputDir() throws {
        let out = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: out) }
        let lonely = try DaemonSettings.resolve(configPath: "/dev/null", environment: [:], flags: try SettingFlags.parse(["--keep-free-mb", "500"]))
        XCTAssertThrowsError(try lonely.outbox(outputDir: out)) { e in
            let text = "\(e)"
            XCTAssertTrue(text.contains("keep_free_mb") && text.contains("outbox_dir"), text)
        }
        XCTAssertEqual(try DaemonSettings().outbox(outputDir: out).dir, nil)
        let good = try DaemonSettings.resolve(configPath: "/dev/null", environment: [:],
                                              flags: try SettingFlags.parse(["--outbox-dir", "\(out)/outbox", "--keep-free-mb", "500"]))
        let (dir, keep) = try good.outbox(outputDir: out)
        XCTAssertEqual(dir, "\(out)/outbox")
        XCTAssertEqual(keep, 500_000_000)
        var shm = stat(), here = stat()
        guard stat("/dev/shm", &shm) == 0, stat(out, &here) == 0, shm.st_dev != here.st_dev else {
            throw XCTSkip("/dev/shm is missing or on the file system of \(out): no second file system to test with")
        }
        let other = try tempDir(in: "/dev/shm")
        defer { try? FileManager.default.removeItem(atPath: other) }
        let far = try DaemonSettings.resolve(configPath: "/dev/null", environment: ["REEL_OUTBOX_DIR": other], flags: [:])
        XCTAssertThrowsError(try far.outbox(outputDir: out)) { e in
            let text = "\(e)"
            XCTAssertTrue(text.contains("REEL_OUTBOX_DIR") && text.contains(other) && text.contains(out) && text.contains("file system"), text)
        }
    }
}
