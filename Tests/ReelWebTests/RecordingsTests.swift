import Foundation
import Glibc
import XCTest

@testable import ReelWeb

/// The recordings directory as reel-web serves it: names, links, `.part` files, ranges.
final class RecordingsTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "reelweb-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: dir)
    }

    func write(_ name: String, _ text: String, mtime: Int? = nil) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: "\(dir)/\(name)"))
        if let mtime {
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: TimeInterval(mtime))], ofItemAtPath: "\(dir)/\(name)")
        }
    }

    func testNamesThatCouldLeaveTheDirectoryOrAreNotFinishedRecordingsAreRefused() {
        for bad in ["", ".", "..", "../x.mp4", "a/b.mp4", "/etc/passwd", ".hidden.mp4", "x.mp4.part",
                    "x.mp4.part.damaged", "x.mov", ".mp4", "a\u{0}b.mp4", "a\nb.mp4", String(repeating: "a", count: 256) + ".mp4"] {
            XCTAssertFalse(RecordingsDirectory.isRecordingName(bad), bad)
        }
        for good in ["clip.mp4", "2026-11-27 take 1.mp4", "a..b.mp4", "é.mp4"] {
            XCTAssertTrue(RecordingsDirectory.isRecordingName(good), good)
        }
    }

    func testTheListHoldsFinishedRegularFilesOnlyNewestFirst() throws {
        try write("old.mp4", "1", mtime: 1_000)
        try write("new.mp4", "22", mtime: 2_000)
        try write("busy.mp4.part", "3")
        try write("bad.mp4.part.damaged", "4")
        try write("notes.txt", "5")
        try FileManager.default.createDirectory(atPath: "\(dir)/folder.mp4", withIntermediateDirectories: false)
        XCTAssertEqual(symlink("/etc/passwd", "\(dir)/link.mp4"), 0)
        XCTAssertEqual(link("\(dir)/old.mp4", "\(dir)/hard.mp4"), 0)  // old.mp4 has two names now
        try write("single.mp4", "333", mtime: 1_500)
        let list = try RecordingsDirectory(path: dir).list()
        XCTAssertEqual(list.map(\.name), ["new.mp4", "single.mp4"])
        XCTAssertEqual(list.map(\.bytes), [2, 3])
        XCTAssertEqual(list.first?.modifiedNs, 2_000_000_000_000)
    }

    /// A recording waiting for upload has two names, the other its outbox entry: served with
    /// `--outbox-dir`; a file hard-linked under another name, or from outside the outbox, is not.
    func testARecordingWaitingInTheOutboxIsServedAndNoOtherHardLink() throws {
        let outbox = dir + "/outbox"
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: false)
        try write("waiting.mp4", "1", mtime: 1_000)
        XCTAssertEqual(link("\(dir)/waiting.mp4", "\(outbox)/waiting.mp4"), 0)
        try write("renamed.mp4", "22", mtime: 2_000)
        XCTAssertEqual(link("\(dir)/renamed.mp4", "\(outbox)/other-name.mp4"), 0)
        try write("elsewhere.mp4", "333", mtime: 3_000)
        XCTAssertEqual(link("\(dir)/elsewhere.mp4", "\(dir)/../elsewhere-\(getpid()).mp4"), 0)
        defer { unlink("\(dir)/../elsewhere-\(getpid()).mp4") }
        try write("same-name-other-file.mp4", "4444", mtime: 4_000)
        XCTAssertEqual(link("\(dir)/same-name-other-file.mp4", "\(dir)/.twin"), 0)
        try write("outbox/same-name-other-file.mp4", "x")
        let with = RecordingsDirectory(path: dir, outbox: outbox)
        XCTAssertEqual(try with.list().map(\.name), ["waiting.mp4"])
        XCTAssertEqual(try with.open("waiting.mp4")?.size, 1)
        XCTAssertNil(try with.open("renamed.mp4"))
        XCTAssertNil(try with.open("elsewhere.mp4"))
        XCTAssertNil(try with.open("same-name-other-file.mp4"))
        // Without --outbox-dir: one name only, as before.
        XCTAssertEqual(try RecordingsDirectory(path: dir).list().map(\.name), [])
        XCTAssertNil(try RecordingsDirectory(path: dir).open("waiting.mp4"))
    }

    func testOpeningRefusesLinksPartsAndEscapesAndReadsRanges() throws {
        try write("clip.mp4", "0123456789")
        try write("clip.mp4.part", "x")
        XCTAssertEqual(symlink("\(dir)/clip.mp4", "\(dir)/link.mp4"), 0)
        let recordings = RecordingsDirectory(path: dir)
        XCTAssertNil(try recordings.open("link.mp4"))
        XCTAssertNil(try recordings.open("clip.mp4.part"))
        XCTAssertNil(try recordings.open("../\((dir as NSString).lastPathComponent)/clip.mp4"))
        XCTAssertNil(try recordings.open("missing.mp4"))
        let file = try XCTUnwrap(try recordings.open("clip.mp4"))
        XCTAssertEqual(file.size, 10)
        XCTAssertEqual(try file.read(at: 3, count: 4), Array("3456".utf8))
        XCTAssertEqual(try file.read(at: 8, count: 4), Array("89".utf8))
        let flags = fcntl(file.fd, F_GETFL)
        XCTAssertEqual(flags & O_ACCMODE, O_RDONLY)
    }

    func testRangeHeaders() {
        XCTAssertEqual(ByteRange.parse(nil, size: 100), .whole)
        XCTAssertEqual(ByteRange.parse("bytes=0-", size: 100), .part(first: 0, last: 99))
        XCTAssertEqual(ByteRange.parse("bytes=10-19", size: 100), .part(first: 10, last: 19))
        XCTAssertEqual(ByteRange.parse("bytes=90-200", size: 100), .part(first: 90, last: 99))
        XCTAssertEqual(ByteRange.parse("bytes=-10", size: 100), .part(first: 90, last: 99))
        XCTAssertEqual(ByteRange.parse("bytes=-1000", size: 100), .part(first: 0, last: 99))
        XCTAssertEqual(ByteRange.parse("bytes=100-", size: 100), .unsatisfiable)
        XCTAssertEqual(ByteRange.parse("bytes=0-1,5-6", size: 100), .whole)
        XCTAssertEqual(ByteRange.parse("bytes=5-1", size: 100), .whole)
        XCTAssertEqual(ByteRange.parse("items=0-1", size: 100), .whole)
        XCTAssertEqual(ByteRange.parse("bytes=x-1", size: 100), .whole)
    }
}
