import Foundation
import Glibc
import Logging
@testable import ReelService
import ReelStorage
import XCTest

/// What a test's JournalSender was given: each entry's fields as text.
/// @unchecked Sendable: `entries` is only touched under `lock`.
private final class SentEntries: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [[String]] = []
    let result: Int32
    init(result: Int32 = 0) { self.result = result }

    var sender: JournalSender {
        { iov in
            let fields = iov.map { v in
                // Safe: each iovec points at iov_len readable bytes for the duration of the call.
                String(decoding: UnsafeRawBufferPointer(start: v.iov_base, count: v.iov_len), as: UTF8.self)
            }
            self.lock.withLock { self.entries.append(fields) }
            return self.result
        }
    }
    var all: [[String]] { lock.withLock { entries } }
}

/// A temporary file standing in for stderr; `text` is what was written to it.
private final class FakeStderr {
    let path = NSTemporaryDirectory() + "reel-stderr-\(UUID().uuidString)"
    let fd: Int32
    init() { fd = open(path, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0o600) }
    var text: String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
    deinit { close(fd); unlink(path) }
}

final class JournalLogTests: XCTestCase {
    func testFieldNamesAreSanitisedToWhatJournaldKeeps() {
        XCTAssertEqual(JournalEntry.fieldName("REEL_FILE"), "REEL_FILE")
        XCTAssertEqual(JournalEntry.fieldName("reel.file"), "REEL_FILE")
        XCTAssertEqual(JournalEntry.fieldName("Reel-Segment 2"), "REEL_SEGMENT_2")
        XCTAssertEqual(JournalEntry.fieldName("_SYSTEMD_UNIT"), "SYSTEMD_UNIT")   // trusted fields start with _
        XCTAssertEqual(JournalEntry.fieldName("__x"), "X")
        XCTAssertEqual(JournalEntry.fieldName("2pass"), "F2PASS")                 // no leading digit
        XCTAssertEqual(JournalEntry.fieldName("café"), "CAF__")                   // each non-ASCII byte is one _
        XCTAssertEqual(JournalEntry.fieldName(String(repeating: "a", count: 80)), String(repeating: "A", count: 64))
        XCTAssertNil(JournalEntry.fieldName(""))
        XCTAssertNil(JournalEntry.fieldName("_"))
        XCTAssertNil(JournalEntry.fieldName("é"))
        for key in ["REEL_FILE", "reel.file", "_x", "2pass", "café", "a b", String(repeating: "z", count: 99)] {
            let name = JournalEntry.fieldName(key)!
            XCTAssertTrue(name.utf8.allSatisfy { (65...90).contains($0) || (48...57).contains($0) || $0 == 95 }, name)
            XCTAssertFalse(name.hasPrefix("_") || name.first!.isNumber || name.utf8.count > 64, name)
        }
    }

    func testARecordIsOneEntryWithPriorityAndItsMetadataAsFields() {
        let sent = SentEntries(), err = FakeStderr()
        var logger = Logger(label: "reeld") { _ in ReelLogHandler(level: .info, journal: true, sender: sent.sender, fd: err.fd) }
        logger[metadataKey: "session"] = "7"
        let line = #line + 1
        logger.notice("recording finished: /v/x.mp4 (2 segments)\nsecond line",
                      metadata: ["REEL_EVENT": "finished", "REEL_FILE": "/v/x.mp4", "REEL_DURATION_NS": "12000000000",
                                 "message": "not the message", "bad key!": "v", "_PID": "1"])
        logger.debug("below the level: not sent")
        logger.critical("stall")
        let entries = sent.all
        XCTAssertEqual(entries.count, 2, "\(entries)")
        XCTAssertEqual(entries.first, [
            "MESSAGE=recording finished: /v/x.mp4 (2 segments)\nsecond line",   // a multi-line message is one entry
            "PRIORITY=5",
            "SYSLOG_IDENTIFIER=reeld",
            "CODE_FILE=ReelServiceTests/JournalLogTests.swift",
            "CODE_LINE=\(line)",
            "CODE_FUNC=testARecordIsOneEntryWithPriorityAndItsMetadataAsFields()",
            "REEL_DURATION_NS=12000000000",   // in the keys' order
            "REEL_EVENT=finished",
            "REEL_FILE=/v/x.mp4",
            "PID=1",
            "BAD_KEY_=v",
            "META_MESSAGE=not the message",
            "SESSION=7",
        ])
        XCTAssertEqual(entries.last?.prefix(2), ["MESSAGE=stall", "PRIORITY=2"])
        XCTAssertEqual(err.text, "", "nothing goes to stderr while the journal takes the entries")
    }

    func testRecordingFieldsNameTheEventFileAndSegment() {
        XCTAssertEqual(RecordingLog.fields(.paused, file: "/v/a.mp4", part: "/v/a.mp4.part", segment: 1, durationNs: 3_000_000_000),
                       ["REEL_EVENT": "paused", "REEL_FILE": "/v/a.mp4", "REEL_PART": "/v/a.mp4.part",
                        "REEL_SEGMENT": "1", "REEL_DURATION_NS": "3000000000"])
        XCTAssertEqual(RecordingLog.fields(.cutShort, file: "/v/a.mp4", more: ["RECORDING": "/v/a.mp4"]),
                       ["REEL_EVENT": "cut-short", "REEL_FILE": "/v/a.mp4", "RECORDING": "/v/a.mp4"])
        XCTAssertEqual(RecordingLog.fields(nil, file: "/v/a.mp4"), ["REEL_FILE": "/v/a.mp4"])
    }

    /// Not the journal, or the journal refused: the `<N>` lines of before, metadata but not the
    /// `REEL_*` fields appended; one line per record.
    func testStderrFallbackKeepsThePriorityPrefixes() {
        let err = FakeStderr()
        let logger = Logger(label: "reeld") { _ in ReelLogHandler(level: .debug, journal: true, sender: nil, fd: err.fd) }
        logger.debug("d"); logger.info("i"); logger.notice("n"); logger.warning("w"); logger.error("e"); logger.critical("c")
        logger.trace("below the level")
        logger.notice("recovered crash-left recording /v/a.mp4.part as /v/a.mp4",
                      metadata: RecordingLog.fields(.recovered, file: "/v/a.mp4", more: ["RECORDING": "/v/a.mp4"]))
        XCTAssertEqual(err.text, "<7>d\n<6>i\n<5>n\n<4>w\n<3>e\n<2>c\n<5>recovered crash-left recording /v/a.mp4.part as /v/a.mp4 RECORDING=/v/a.mp4\n")

        let refused = SentEntries(result: -ENOENT), err2 = FakeStderr()
        let logger2 = Logger(label: "reeld") { _ in ReelLogHandler(level: .info, journal: true, sender: refused.sender, fd: err2.fd) }
        logger2.warning("disk slow", metadata: ["REEL_FILE": "/v/a.mp4"])
        logger2.error("disk gone")
        XCTAssertEqual(refused.all.count, 2, "each record is offered to the journal first")
        // The first refusal in the process is explained once (this test may not be the first).
        let lines = err2.text.split(separator: "\n").filter { !$0.hasSuffix("priority prefixes instead, without journal fields") }
        XCTAssertEqual(lines, ["<4>disk slow", "<3>disk gone"])
    }

    /// A record is one stderr line whatever it holds: a device name with "\n<0>" cannot start a
    /// line of its own (another priority, a forged message); control characters are escaped.
    func testStderrFallbackEscapesNewlinesAndControlCharacters() {
        let err = FakeStderr()
        let logger = Logger(label: "reeld") { _ in ReelLogHandler(level: .info, journal: true, sender: nil, fd: err.fd) }
        logger.error("cannot open 'cam\n<0>reeld: forged'", metadata: ["device": "a\r\nb\u{1b}[2J\u{85}c\td"])
        XCTAssertEqual(err.text, "<3>cannot open 'cam\\n<0>reeld: forged' device=a\\r\\nb\\x1b[2J\\u{85}c\\td\n")
        let tty = FakeStderr()
        let plain = Logger(label: "reeld") { _ in ReelLogHandler(level: .info, journal: false, sender: nil, fd: tty.fd) }
        plain.warning("x\ny")
        XCTAssertEqual(tty.text.split(separator: "\n").count, 1, tty.text)
        XCTAssertTrue(tty.text.hasSuffix(" WARNING x\\ny\n"), tty.text)
    }

    /// sd_journal_sendv drops entries silently when the socket is missing: only a socket counts.
    func testOnlyAReachableSocketIsUsed() throws {
        let dir = NSTemporaryDirectory() + "reel-sock-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        XCTAssertFalse(JournalSend.reachable("\(dir)/socket"))
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(dir)/file", contents: Data()))
        XCTAssertFalse(JournalSend.reachable("\(dir)/file"))
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_un(); addr.sun_family = sa_family_t(AF_UNIX)
        let path = "\(dir)/socket"
        withUnsafeMutableBytes(of: &addr.sun_path) { dst in
            // Safe: the path (well under 108 bytes) and its NUL are copied into sun_path's own bytes.
            path.utf8CString.withUnsafeBytes { dst.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(dst.count))) }
        }
        let rc = withUnsafePointer(to: &addr) {
            // Safe: sockaddr_un is what bind reads, for its size.
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(rc, 0, String(cString: strerror(errno)))
        XCTAssertTrue(JournalSend.reachable(path))
    }

    func testSyslogPrioritiesMapToLevelsAndBack() {
        XCTAssertEqual((0...7).map { ReelLogHandler.priority(ReelLogHandler.level(syslogPriority: Int32($0))) }, [2, 2, 2, 3, 4, 5, 6, 7])
    }
}
