import Foundation
import Logging
@testable import ReelService
import XCTest

/// The metrics file's tmp is created, never opened: a link planted there is refused (the file it
/// points to untouched), a regular tmp a crash of reeld's own left is replaced, and a link at the
/// metrics name itself is replaced by the rename, never followed.
final class MetricsFileLinkTests: XCTestCase {
    func testAPlantedTmpLinkIsRefusedAndACrashLeftTmpIsReplaced() throws {
        let dir = NSTemporaryDirectory() + "reel-metrics-link-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let recording = dir + "/lecture.mp4", path = dir + "/reel.prom"
        XCTAssertTrue(FileManager.default.createFile(atPath: recording, contents: Data("media".utf8)))
        XCTAssertEqual(symlink(recording, path + ".tmp"), 0)
        let errors = ErrorCounts()
        let file = MetricsFile(path: path, logger: Logger(label: "test"), errors: errors)
        file.write("a 1\n")
        XCTAssertEqual(try String(contentsOfFile: recording, encoding: .utf8), "media", "written through the planted link")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        XCTAssertEqual(errors.snapshot[.metrics], 1)
        // A regular tmp of this user (what a crash mid-write leaves): removed by name, written afresh.
        XCTAssertEqual(unlink(path + ".tmp"), 0)
        XCTAssertTrue(FileManager.default.createFile(atPath: path + ".tmp", contents: Data("half".utf8)))
        file.write("a 2\n")
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "a 2\n")
        // A link at the metrics name: the rename replaces the link, the recording stays as it was.
        XCTAssertEqual(unlink(path), 0)
        XCTAssertEqual(symlink(recording, path), 0)
        file.write("a 3\n")
        XCTAssertEqual(try String(contentsOfFile: recording, encoding: .utf8), "media")
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFREG, "the metrics name is still a link")
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "a 3\n")
        XCTAssertEqual(errors.snapshot[.metrics], 1)
    }
}
