import Foundation
import Logging
import ReelCore
@testable import ReelStorage
import ReelSystem
import XCTest

/// A LogHandler that keeps every record (level and text), for tests that check what recovery said.
final class CapturedLog: @unchecked Sendable {  // @unchecked Sendable: `records` is guarded by `lock`
    private let lock = NSLock()
    private var records: [(level: Logger.Level, text: String)] = []
    func append(_ level: Logger.Level, _ text: String) { lock.lock(); records.append((level, text)); lock.unlock() }
    var all: [(level: Logger.Level, text: String)] { lock.lock(); defer { lock.unlock() }; return records }
    func take() -> [(level: Logger.Level, text: String)] { lock.lock(); defer { records = []; lock.unlock() }; return records }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(log: self) }
    }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { log.append(event.level, "\(event.message)") }
    }
}

/// Byte-level pieces of the files recovery meets: Reel's layout (ftyp, the 16-byte placeholder,
/// the signature box, moov, moof/mdat pairs) written out by hand, so that these tests pin the
/// format on disk rather than the code that writes it.
enum PartBytes {
    static func be32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xff), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
    static func box(_ type: String, _ payload: Int, fill: UInt8 = 0) -> [UInt8] {
        be32(8 + payload) + Array(type.utf8) + [UInt8](repeating: fill, count: payload)
    }
    static func box(_ type: String, body: [UInt8]) -> [UInt8] { be32(8 + body.count) + Array(type.utf8) + body }
    static let ftyp = box("ftyp", body: Array("isom".utf8) + be32(512) + Array("isomiso2avc1mp41".utf8))
    static let placeholder = box("free", 8)
    /// "ReelPart", version 1.
    static let signature = box("free", body: Array("ReelPart".utf8) + [1])
    /// A sample-less moov of the shape libavformat writes (one video track, an mvex).
    static let moov: [UInt8] = {
        let stbl = box("stbl", body: box("stsd", 16) + box("stts", 8) + box("stsc", 8) + box("stsz", 12) + box("stco", 8))
        let minf = box("minf", body: box("vmhd", 12) + box("dinf", body: box("dref", 20)) + stbl)
        let mdia = box("mdia", body: box("mdhd", 24) + box("hdlr", 37) + minf)
        let trak = box("trak", body: box("tkhd", 84) + box("edts", body: box("elst", 20)) + mdia)
        return box("moov", body: box("mvhd", 100) + trak + box("mvex", body: box("trex", 24)))
    }()
    static var head: [UInt8] { ftyp + placeholder + signature + moov }
    /// A moof as Reel's muxer writes one (mfhd; a traf with tfhd default-base-is-moof and one
    /// trun with a data offset and sample sizes) and the mdat holding exactly its samples.
    static func fragment(_ n: Int, samples: [Int] = [300, 200, 500]) -> [UInt8] { moof(n, samples: samples) + mdat(n, samples: samples) }
    static func moof(_ n: Int, samples: [Int] = [300, 200, 500], count: Int? = nil) -> [UInt8] {
        let moofSize = 8 + 16 + 8 + 16 + 8 + 12 + 4 * samples.count
        let trun = box("trun", body: [0, 0, 2, 1] + be32(count ?? samples.count) + be32(moofSize + 8) + samples.flatMap { be32($0) })
        let traf = box("traf", body: box("tfhd", body: [0, 2, 0, 0] + be32(1)) + trun)
        return box("moof", body: box("mfhd", body: [0, 0, 0, 0] + be32(n)) + traf)
    }
    static func mdat(_ n: Int, samples: [Int] = [300, 200, 500]) -> [UInt8] { box("mdat", samples.reduce(0, +), fill: UInt8(n)) }
    /// A take marker ("ReelTake", version 1, take index, start 0, no label).
    static func marker(_ index: Int) -> [UInt8] { box("free", body: Array("ReelTake".utf8) + [1] + be32(index) + [UInt8](repeating: 0, count: 8)) }
}

final class RecoveryTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "reel-recovery-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    private func write(_ name: String, _ bytes: [UInt8]) {
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(dir)/\(name)", contents: Data(bytes)))
    }

    private func files() -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        for n in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
            out[n] = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: "\(dir)/\(n)"))) ?? Data())
        }
        return out
    }

    /// The bytes `original` are still in the directory, whole, as `name` or moved aside as
    /// `name.SUFFIX`; nothing else of that name is.
    private func assertKept(_ name: String, _ original: [UInt8], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let all = files()
        let mine = all.filter { $0.key == name || $0.key.hasPrefix(name + ".") }
        XCTAssertEqual(mine.count, 1, "\(what): \(all.keys.sorted())", file: file, line: line)
        XCTAssertTrue(mine.first?.value == original, "\(what): the file was changed (\(mine.first?.value.count ?? -1) bytes for \(original.count))",
                      file: file, line: line)
    }

    /// Issue 22: a 24-byte `.part` (an empty ftyp, then a `free` box whose 64-bit size is
    /// 0x7FFFFFFFFFFFFFFF) trapped recovery (`offset + box.size` overflowed) and so killed reeld
    /// at every start. It is left byte for byte (or moved aside), and the other files are still
    /// dealt with.
    func testAHostile64BitSizeIsLeftAloneAndTheOthersAreStillRecovered() throws {
        let hostile: [UInt8] = PartBytes.be32(8) + Array("ftyp".utf8) + PartBytes.be32(1) + Array("free".utf8) + [0x7f] + [UInt8](repeating: 0xff, count: 7)
        XCTAssertEqual(hostile.count, 24)
        write("a.mp4.part", hostile)
        write("b.mp4.part", PartBytes.head)  // Reel's, nothing recorded: removed
        let log = CapturedLog()
        Storage.recoverPartFiles(in: dir, logger: log.logger)
        assertKept("a.mp4.part", hostile, "the hostile file")
        XCTAssertNil(files()["b.mp4.part"], "the file after it was not dealt with")
        XCTAssertTrue(log.all.contains { $0.level >= .warning && $0.text.contains("\(dir)/a.mp4.part") }, "\(log.all)")
    }

    /// Issue 22: the first two thirds of an ordinary MP4 (moov first, then the media) named
    /// `dl.mp4.part` (a download) were deleted as "holding no media". Not Reel's: left alone, with
    /// one warning naming it.
    func testAnOrdinaryMoovFirstMP4CutShortIsLeftAlone() throws {
        let whole = PartBytes.ftyp + PartBytes.box("free", 0) + PartBytes.box("moov", 600, fill: 3) + PartBytes.box("mdat", 3000, fill: 9)
        let cut = Array(whole.prefix(whole.count * 2 / 3))
        write("dl.mp4.part", cut)
        let log = CapturedLog()
        XCTAssertEqual(Storage.recoverPartFiles(in: dir, logger: log.logger), [])
        XCTAssertTrue(files() == ["dl.mp4.part": cut], "touched a file Reel did not write: \(files().mapValues(\.count))")
        let said = log.all.filter { $0.text.contains("\(dir)/dl.mp4.part") }
        XCTAssertEqual(said.count, 1, "\(said)")
        XCTAssertEqual(said.first?.level, .warning, "\(said)")
    }

    /// Issue 22: a Reel `.part` with one damaged box in the middle was cut there, losing every
    /// fragment after it. It is not cut: left byte for byte or moved aside, reported once with
    /// what is wrong, and not taken up again at the next start.
    func testAReelPartWithADamagedBoxInTheMiddleIsNotCut() throws {
        var damaged = PartBytes.fragment(2)
        damaged[4..<8] = ArraySlice("mo0f".utf8)
        let bytes = PartBytes.head + PartBytes.marker(1) + PartBytes.fragment(1) + damaged + PartBytes.fragment(3) + PartBytes.fragment(4)
        write("mid.mp4.part", bytes)
        let log = CapturedLog()
        XCTAssertEqual(Storage.recoverPartFiles(in: dir, logger: log.logger), [])
        assertKept("mid.mp4.part", bytes, "a damaged Reel part")
        let said = log.take().filter { $0.level >= .warning && $0.text.contains("\(dir)/mid.mp4.part") }
        XCTAssertEqual(said.count, 1, "reported once: \(said)")
        // The next start does not take it up again (nor report it again).
        XCTAssertEqual(Storage.recoverPartFiles(in: dir, logger: log.logger), [])
        assertKept("mid.mp4.part", bytes, "at the next start")
        XCTAssertEqual(log.all.filter { $0.level >= .notice && $0.text.contains("mid.mp4.part") }.map(\.text), [], "reported again")
    }

    /// A `.part` that holds nothing is removed only when it is Reel's (the signature, then only
    /// the boxes written before the first fragment); the same bytes without the signature (the
    /// layout of a Reel before it, or anyone's) stay, as does a file of no bytes at all.
    func testOnlyReelsPartsWithNothingInThemAreRemoved() throws {
        write("reel.mp4.part", PartBytes.head)
        write("reel-cut.mp4.part", PartBytes.head + Array(PartBytes.fragment(1).prefix(300)))
        let unsigned = PartBytes.ftyp + PartBytes.placeholder + PartBytes.moov
        write("unsigned.mp4.part", unsigned)
        write("empty.mp4.part", [])
        Storage.recoverPartFiles(in: dir, logger: CapturedLog().logger)
        XCTAssertTrue(files() == ["unsigned.mp4.part": unsigned, "empty.mp4.part": []], "\(files().mapValues(\.count))")
    }

    /// Moving aside never replaces a file: an older `.damaged` stays as it was.
    func testMovingAsideReplacesNothing() throws {
        var damaged = PartBytes.fragment(2)
        damaged[4..<8] = ArraySlice("mo0f".utf8)
        let bytes = PartBytes.head + PartBytes.fragment(1) + damaged
        write("x.mp4.part", bytes)
        write("x.mp4.part.damaged", [1, 2, 3])
        let r = Storage.recover(in: dir, logger: CapturedLog().logger)
        XCTAssertEqual(r.map(\.outcome).first.map { if case let .movedAside(to, _) = $0 { return to }; return "" }, "\(dir)/x.mp4.part.damaged-2")
        XCTAssertTrue(files() == ["x.mp4.part.damaged": [1, 2, 3], "x.mp4.part.damaged-2": bytes], "\(files().mapValues(\.count))")
    }

    /// A symbolic link, a FIFO or a directory named like a `.part` is left alone (a FIFO does not
    /// block recovery); the Reel file after them is still dealt with.
    func testLinksFifosAndDirectoriesAreLeftAlone() throws {
        write("target", PartBytes.head)
        XCTAssertEqual(symlink("\(dir)/target", "\(dir)/a-link.mp4.part"), 0)
        XCTAssertEqual(mkfifo("\(dir)/b-fifo.mp4.part", 0o600), 0)
        try FileManager.default.createDirectory(atPath: "\(dir)/c-dir.mp4.part", withIntermediateDirectories: false)
        write("d.mp4.part", PartBytes.head)
        let log = CapturedLog()
        let r = Storage.recover(in: dir, logger: log.logger)
        XCTAssertEqual(r.map(\.outcome).map { if case .leftAlone = $0 { return "left" }; return "\($0)" }, ["left", "left", "left", "removed"])
        XCTAssertTrue(files()["target"] == PartBytes.head, "the link was followed")
        XCTAssertEqual(log.all.filter { $0.level == .warning }.count, 3, "\(log.all)")
    }
}
