import Foundation
import Glibc
import Logging
import ReelCore
@testable import ReelStorage
import ReelSystem
import Synchronization
import XCTest

private func tempDir(_ what: String, in base: String? = nil) throws -> String {
    let root = base ?? FileManager.default.temporaryDirectory.path
    let d = "\(root)/reel-\(what)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    return d
}

private func inode(_ path: String) -> ino_t? {
    var st = stat()
    return lstat(path, &st) == 0 ? st.st_ino : nil
}

/// `keep_free_mb`'s decision (`Retention`), on fake listings.
final class RetentionTests: XCTestCase {
    private let mb: Int64 = 1_000_000

    func testOnlyTheOldestUploadedRecordingIsChosen() {
        let entries = [
            RetentionEntry(name: "waiting.mp4", bytes: 5 * mb, modifiedNs: 1, links: 2, inOutbox: true),        // oldest, still queued
            RetentionEntry(name: "linked-elsewhere.mp4", bytes: 5 * mb, modifiedNs: 2, links: 2),             // another name somewhere
            RetentionEntry(name: "outbox-entry-only.mp4", bytes: 5 * mb, modifiedNs: 3, inOutbox: true),       // a planted entry, say
            RetentionEntry(name: "handing-on.mp4", bytes: 5 * mb, modifiedNs: 4, handoffPending: true),        // link and on_finish not over
            RetentionEntry(name: "busy.mp4.part", bytes: 5 * mb, modifiedNs: 5),
            RetentionEntry(name: ".hidden.mp4", bytes: 5 * mb, modifiedNs: 6),
            RetentionEntry(name: "dir.mp4", bytes: 5 * mb, modifiedNs: 7, isRegular: false),
            RetentionEntry(name: "current.mp4", bytes: 5 * mb, modifiedNs: 8),                                 // the one in progress
            RetentionEntry(name: "foreign.mp4", bytes: 5 * mb, modifiedNs: 9),                                 // no signature
            RetentionEntry(name: "notes.txt", bytes: 5 * mb, modifiedNs: 10),
            RetentionEntry(name: "b-uploaded.mp4", bytes: 5 * mb, modifiedNs: 20),
            RetentionEntry(name: "a-uploaded.mp4", bytes: 5 * mb, modifiedNs: 20),                             // same time: by name
            RetentionEntry(name: "newest-uploaded.mp4", bytes: 5 * mb, modifiedNs: 30),
        ]
        let next = Retention.next(freeBytes: 10 * mb, keepFreeBytes: 100 * mb, entries: entries, inProgress: "current.mp4", refused: ["foreign.mp4"])
        XCTAssertEqual(next, .delete(entries[11]))
        // At or above the line: nothing.
        XCTAssertEqual(Retention.next(freeBytes: 100 * mb, keepFreeBytes: 100 * mb, entries: entries, inProgress: nil), .enough)
        // Only what may never go: nothing to free.
        let kept = entries.filter { !$0.name.contains("uploaded") }
        XCTAssertEqual(Retention.next(freeBytes: 10 * mb, keepFreeBytes: 100 * mb, entries: kept, inProgress: "current.mp4", refused: ["foreign.mp4"]),
                       .nothingToFree)
        XCTAssertEqual(Retention.next(freeBytes: 10 * mb, keepFreeBytes: 100 * mb, entries: [], inProgress: nil), .nothingToFree)
    }

    /// Decided again after each deletion (as `RoomKeeper` does): oldest first, and it stops as
    /// soon as free space is back, leaving the newer ones.
    func testRepeatedDecisionsDeleteOldestFirstUntilThereIsRoom() {
        var entries = (0..<6).map { RetentionEntry(name: "r\($0).mp4", bytes: 10 * mb, modifiedNs: Nanos(100 - $0)) }
        entries.append(RetentionEntry(name: "queued.mp4", bytes: 50 * mb, modifiedNs: 0, links: 2, inOutbox: true))
        var free = 15 * mb, deleted: [String] = []
        while case let .delete(e) = Retention.next(freeBytes: free, keepFreeBytes: 42 * mb, entries: entries, inProgress: nil) {
            deleted.append(e.name)
            entries.removeAll { $0.name == e.name }
            free += e.bytes
        }
        XCTAssertEqual(deleted, ["r5.mp4", "r4.mp4", "r3.mp4"])
        XCTAssertEqual(free, 45 * mb)
        XCTAssertTrue(entries.contains { $0.name == "queued.mp4" })
    }
}

/// The outbox: the start-up checks, the link (never through or over a planted entry), the census.
final class OutboxTests: XCTestCase {
    private let logger = Logger(label: "test")

    func testTheSameFileSystemRuleNamesBothPathsAndTheFix() throws {
        XCTAssertNil(Outbox.filesystemMismatch(outboxDevice: 5, outputDevice: 5, outbox: "/a/outbox", outputDir: "/a"))
        let why = try XCTUnwrap(Outbox.filesystemMismatch(outboxDevice: 5, outputDevice: 6, outbox: "/dev/shm/box", outputDir: "/var/lib/reel"))
        XCTAssertTrue(why.contains("/dev/shm/box") && why.contains("/var/lib/reel") && why.contains("/var/lib/reel/outbox"), why)

        let out = try tempDir("out")
        defer { try? FileManager.default.removeItem(atPath: out) }
        // Beside the recordings: created, group-writable, fine.
        XCTAssertNil(Outbox.problem(outbox: "\(out)/outbox", outputDir: out))
        var st = stat()
        XCTAssertEqual(lstat("\(out)/outbox", &st), 0)
        XCTAssertEqual(st.st_mode & 0o7777, 0o770)
        // Not a directory; a symbolic link to one.
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(out)/file", contents: Data()))
        XCTAssertTrue(Outbox.problem(outbox: "\(out)/file", outputDir: out)?.contains("is not a directory") ?? false)
        XCTAssertEqual(symlink("\(out)/outbox", "\(out)/linkbox"), 0)
        XCTAssertTrue(Outbox.problem(outbox: "\(out)/linkbox", outputDir: out)?.contains("symbolic link") ?? false)
        // Another file system: /dev/shm is a tmpfs.
        var shm = stat(), here = stat()
        guard stat("/dev/shm", &shm) == 0, stat(out, &here) == 0 else { throw XCTSkip("no /dev/shm") }
        guard shm.st_dev != here.st_dev else { throw XCTSkip("/dev/shm and \(out) are on one file system: nothing to test") }
        let other = try tempDir("shmbox", in: "/dev/shm")
        defer { try? FileManager.default.removeItem(atPath: other) }
        let refused = try XCTUnwrap(Outbox.problem(outbox: other, outputDir: out))
        XCTAssertTrue(refused.contains(other) && refused.contains(out) && refused.contains("another file system"), refused)
    }

    func testTheLinkIsTheSameFileAndNeverFollowsOrReplacesAPlantedEntry() throws {
        let out = try tempDir("link")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let box = Outbox(path: "\(out)/outbox")
        XCTAssertNil(Outbox.problem(outbox: box.path, outputDir: out))
        for n in ["a", "b", "c"] { XCTAssertTrue(FileManager.default.createFile(atPath: "\(out)/\(n).mp4", contents: Data(n.utf8))) }
        XCTAssertEqual(box.link("\(out)/a.mp4"), .linked("\(box.path)/a.mp4"))
        XCTAssertEqual(inode("\(box.path)/a.mp4"), inode("\(out)/a.mp4"))
        // Again (a crash after the link): the same file, nothing done.
        XCTAssertEqual(box.link("\(out)/a.mp4"), .alreadyLinked("\(box.path)/a.mp4"))
        // A planted symbolic link: neither followed (its target is not created) nor replaced.
        XCTAssertEqual(symlink("\(out)/target.mp4", "\(box.path)/b.mp4"), 0)
        guard case let .failed(why) = box.link("\(out)/b.mp4") else { return XCTFail("a planted link was accepted") }
        XCTAssertTrue(why.contains("symbolic link") && why.contains("ln "), why)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(out)/target.mp4"))
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: "\(box.path)/b.mp4"), "\(out)/target.mp4")
        // Another file of the same name: left as it is.
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(box.path)/c.mp4", contents: Data("other".utf8)))
        guard case .failed = box.link("\(out)/c.mp4") else { return XCTFail("another file was taken for the recording") }
        XCTAssertEqual(try String(contentsOfFile: "\(box.path)/c.mp4", encoding: .utf8), "other")
        XCTAssertEqual(try String(contentsOfFile: "\(out)/c.mp4", encoding: .utf8), "c")
    }

    func testTheCensusCountsWaitingRecordingsOnly() throws {
        let d = try tempDir("census")
        defer { try? FileManager.default.removeItem(atPath: d) }
        let box = Outbox(path: d)
        XCTAssertEqual(box.census(), OutboxCensus())
        try Data(count: 100).write(to: URL(fileURLWithPath: "\(d)/old.mp4"))
        try Data(count: 50).write(to: URL(fileURLWithPath: "\(d)/new.mp4"))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_000)], ofItemAtPath: "\(d)/old.mp4")
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 2_000)], ofItemAtPath: "\(d)/new.mp4")
        try Data(count: 7).write(to: URL(fileURLWithPath: "\(d)/.partial.mp4"))  // rclone's own temporary, say
        try Data(count: 7).write(to: URL(fileURLWithPath: "\(d)/notes.txt"))
        XCTAssertEqual(symlink("/etc/passwd", "\(d)/link.mp4"), 0)
        let c = try XCTUnwrap(box.census())
        XCTAssertEqual(c.files, 2)
        XCTAssertEqual(c.bytes, 150)
        XCTAssertEqual(c.oldestModifiedNs, 1_000 * nanosPerSecond)
        XCTAssertTrue(c.complete)
        XCTAssertEqual(c.oldestAgeSeconds(nowNs: 4_600 * nanosPerSecond + 999_999_999), 3_600)
        XCTAssertEqual(c.oldestAgeSeconds(nowNs: 0), 0, "a clock set back is no negative age")
        XCTAssertEqual(OutboxCensus().oldestAgeSeconds(nowNs: 5), 0)
        // Bounded: at most `limit` entries read (".", ".." and the others count).
        let capped = try XCTUnwrap(box.census(limit: 2))
        XCTAssertFalse(capped.complete)
        XCTAssertLessThanOrEqual(capped.files, 2)
        XCTAssertNil(Outbox(path: "\(d)/missing").census())
    }

    /// The hand-off links before on_finish runs (the hook sees the link), and marks the marker;
    /// at a start after a crash, a marker that says `linked` is not linked again (the uploader
    /// may have taken it), one that does not is.
    func testHandOnLinksBeforeTheHookAndResumeLinksOnlyWhatWasNotLinked() throws {
        let out = try tempDir("handon")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let box = Outbox(path: "\(out)/outbox")
        XCTAssertNil(Outbox.problem(outbox: box.path, outputDir: out))
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(out)/a.mp4.part", contents: Data("a".utf8)))
        let f = try Handoff.place(part: "\(out)/a.mp4.part", final: "\(out)/a.mp4", by: .cap, sync: true, logger: logger)
        XCTAssertFalse(box.holds("a.mp4"), "linked before the hand-off's link step")
        let seen = "\(out)/seen"
        let hook = ["/bin/sh", "-c", "[ \"$(stat -c %i \"$0\")\" = \"$(stat -c %i '\(box.path)/a.mp4')\" ] && echo linked > '\(seen)'"]
        Handoff.handOn(f, recovered: false, hook: hook, timeoutNs: 30 * nanosPerSecond, outbox: box, logger: logger)
        XCTAssertEqual(Handoff.readMarker(Handoff.marker(for: f.path))?.linked, true)
        FinishHook.waitForRunning(until: SystemClock.now() + 30 * nanosPerSecond, logger: logger)
        XCTAssertEqual(try String(contentsOfFile: seen, encoding: .utf8), "linked\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: Handoff.marker(for: f.path)))

        // Crash-left markers: b was linked and has been uploaded since (link gone); c was not linked.
        for (n, text) in [("b", "stop\nlinked\n"), ("c", "stop\n")] {
            XCTAssertTrue(FileManager.default.createFile(atPath: "\(out)/\(n).mp4", contents: Data(n.utf8)))
            XCTAssertTrue(FileManager.default.createFile(atPath: "\(out)/.\(n).mp4.handoff", contents: Data(text.utf8)))
        }
        let failures = Mutex<[String]>([])
        let files = Handoff.resume(in: out, recovered: [], hook: [], timeoutNs: 0, outbox: box, logger: logger,
                                   linkFailed: { why in failures.withLock { $0.append(why) } })
        XCTAssertEqual(files.map(\.path).sorted(), ["\(out)/b.mp4", "\(out)/c.mp4"])
        XCTAssertFalse(box.holds("b.mp4"), "an uploaded recording was queued again")
        XCTAssertEqual(inode("\(box.path)/c.mp4"), inode("\(out)/c.mp4"))
        XCTAssertEqual(failures.withLock { $0 }, [])

        // A failed link is reported, and the recording stays.
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(out)/d.mp4", contents: Data("d".utf8)))
        XCTAssertEqual(symlink("/etc/passwd", "\(box.path)/d.mp4"), 0)
        Handoff.handOn(FinishedFile(path: "\(out)/d.mp4", by: .stop), recovered: false, hook: [], timeoutNs: 0, outbox: box, logger: logger,
                       linkFailed: { why in failures.withLock { $0.append(why) } })
        XCTAssertEqual(failures.withLock { $0.count }, 1)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(out)/d.mp4"))
        // ...held by `.d.mp4.unqueued` (one link and no outbox entry, like an uploaded one, but
        // keep_free_mb leaves it alone), and linked at the next start once the entry is gone.
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(out)/.d.mp4.unqueued"))
        Handoff.resume(in: out, recovered: [], hook: [], timeoutNs: 0, outbox: box, logger: logger)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(out)/.d.mp4.unqueued"), "removed while the link still fails")
        XCTAssertEqual(unlink("\(box.path)/d.mp4"), 0)
        let dfd = open(out, O_RDONLY | O_DIRECTORY)
        defer { close(dfd) }
        let d = try XCTUnwrap(RoomKeeper.entry(dfd, "d.mp4", outbox: box))
        XCTAssertEqual(d.links, 1)
        XCTAssertFalse(d.inOutbox)
        XCTAssertFalse(Retention.deletable(d, inProgress: nil), "a recording never queued was taken for an uploaded one")
        Handoff.resume(in: out, recovered: [], hook: [], timeoutNs: 0, outbox: box, logger: logger)
        XCTAssertEqual(inode("\(box.path)/d.mp4"), inode("\(out)/d.mp4"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(out)/.d.mp4.unqueued"))
    }

    /// `RoomKeeper`'s view of the directory: the listing and Reel's signature (a file without it
    /// is never deleted).
    func testTheKeepersListingAndSignatureCheck() throws {
        let out = try tempDir("keeper")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let box = Outbox(path: "\(out)/outbox")
        XCTAssertNil(Outbox.problem(outbox: box.path, outputDir: out))
        try Data(PartBytes.head + PartBytes.fragment(1)).write(to: URL(fileURLWithPath: "\(out)/reels.mp4"))
        try Data(PartBytes.head + PartBytes.fragment(1)).write(to: URL(fileURLWithPath: "\(out)/queued.mp4"))
        XCTAssertEqual(link("\(out)/queued.mp4", "\(box.path)/queued.mp4"), 0)
        try Data(PartBytes.ftyp + PartBytes.moov).write(to: URL(fileURLWithPath: "\(out)/foreign.mp4"))
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(out)/.reels.mp4.handoff", contents: Data()))
        let dfd = open(out, O_RDONLY | O_DIRECTORY)
        defer { close(dfd) }
        let entries = Dictionary(uniqueKeysWithValues: RoomKeeper.list(dfd, outbox: box).map { ($0.name, $0) })
        XCTAssertEqual(Set(entries.keys), ["reels.mp4", "queued.mp4", "foreign.mp4"])
        XCTAssertEqual(entries["queued.mp4"]?.links, 2)
        XCTAssertEqual(entries["queued.mp4"]?.inOutbox, true)
        XCTAssertEqual(entries["reels.mp4"]?.handoffPending, true)
        XCTAssertEqual(entries["foreign.mp4"]?.handoffPending, false)
        XCTAssertTrue(RoomKeeper.isReels(dfd, "reels.mp4"))
        XCTAssertFalse(RoomKeeper.isReels(dfd, "foreign.mp4"))
        XCTAssertEqual(symlink("\(out)/reels.mp4", "\(out)/sym.mp4"), 0)
        XCTAssertFalse(RoomKeeper.isReels(dfd, "sym.mp4"), "a link is never followed")
    }
}
