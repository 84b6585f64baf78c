import Foundation
@testable import ReelFuzz
import ReelMedia
import XCTest

/// `make test` replays the media fuzzers' seeds and regression inputs (Tests/fuzz/finish: real
/// `.part` files of `reeld record` and the hostile files of issue 22; Tests/fuzz/marker: take-marker
/// bodies; Tests/fuzz/boxes: top-level box walks) through their checks.
final class MediaFuzzReplayTests: XCTestCase {
    static let corpora = FuzzReplayTests.corpora

    private func replay(_ name: String, atLeast minimum: Int, _ check: ([UInt8]) -> [String]) throws {
        let files = try FuzzChecks.inputs(at: Self.corpora + "/" + name)
        XCTAssertGreaterThanOrEqual(files.count, minimum, "Tests/fuzz/\(name) lost its inputs")
        for file in files {
            XCTAssertEqual(check(Array(try Data(contentsOf: URL(fileURLWithPath: file)))), [], "\(file)")
        }
    }

    /// The regression inputs first in a process of their own, limited to 2 GiB of address space
    /// and 60 s of CPU: on the finisher before issue 22 one trapped (SIGILL, an overflow) and one
    /// allocated without end (a trun of 2^32-1 samples), which would take the test runner down.
    func testFinishInputsInABoundedProcess() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        process.arguments = ["--as=\(2 << 30)", "--cpu=60", try Self.binary("fuzz-finish").path, Self.corpora + "/finish"]
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .exit, "fuzz-finish was killed by signal \(process.terminationStatus): \(text.suffix(2000))")
        XCTAssertEqual(process.terminationStatus, 0, text.suffix(2000).description)
    }

    func testFinishCorpusAndRegressionsPassTheChecks() throws {
        try replay("finish", atLeast: 25, FuzzChecks.finish)
    }

    func testBoxesCorpusAndRegressionsPassTheChecks() throws {
        try replay("boxes", atLeast: 8, FuzzChecks.boxes)
    }

    /// The box walker's check sees the bad cases: a 64-bit size past Int64.max is damage, a size
    /// past the end is a box cut short (not an overflow), a size below the header is damage.
    func testBoxesCheckReadsTheIssueFile() {
        let issue: [UInt8] = [0, 0, 0, 8] + Array("ftyp".utf8) + [0, 0, 0, 1] + Array("free".utf8) + [0x7f] + [UInt8](repeating: 0xff, count: 7)
        XCTAssertEqual(FuzzChecks.referenceBox(issue, 8), "cut free 9223372036854775807")
        XCTAssertEqual(MP4BoxHeader.place(Array(issue[8...]), at: 8, fileSize: 24), .cutShort(MP4BoxHeader(Array(issue[8...]))))
        XCTAssertEqual(FuzzChecks.boxes(issue), [])
        let past: [UInt8] = [0, 0, 0, 1] + Array("free".utf8) + [UInt8](repeating: 0xff, count: 8)
        XCTAssertEqual(MP4BoxHeader.place(past, at: 0, fileSize: 16), .damaged("has a 64-bit size of 18446744073709551615"))
        XCTAssertNil(MP4BoxHeader(past))
        let small: [UInt8] = [0, 0, 0, 7] + Array("free".utf8)
        XCTAssertEqual(MP4BoxHeader.place(small, at: 0, fileSize: 8), .damaged("has a size of 7, less than its 8-byte header"))
        XCTAssertEqual(FuzzChecks.boxes(past + small), [])
    }

    func testMarkerCorpusAndRegressionsPassTheChecks() throws {
        try replay("marker", atLeast: 10, FuzzChecks.marker)
    }

    /// Every hostile file (all but the `seed-` ones, which finish, and the `unsupported-` ones, not
    /// an MP4 at all) is refused as damaged with the box and its offset named, and left byte for
    /// byte as it was.
    func testHostileFilesAreRefusedNamingTheBoxAndLeftAsTheyWere() throws {
        let files = try FuzzChecks.inputs(at: Self.corpora + "/finish")
        let seeds = files.filter { URL(fileURLWithPath: $0).lastPathComponent.hasPrefix("seed-") }
        XCTAssertGreaterThanOrEqual(seeds.count, 2, "real .part seeds in Tests/fuzz/finish")
        for file in files {
            let name = URL(fileURLWithPath: file).lastPathComponent
            let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("reel-fuzz-\(getpid())-\(name).mp4.part").path
            try bytes.write(to: URL(fileURLWithPath: path))
            defer { unlink(path) }
            if name.hasPrefix("seed-") {
                let r = try MP4Finisher.finish(path: path)
                XCTAssertTrue(r.alreadyFinished || r.samples > 0, "\(name): \(r)")
                continue
            }
            if name.hasPrefix("unsupported-") {
                XCTAssertThrowsError(try MP4Finisher.finish(path: path)) { XCTAssertEqual(($0 as? MP4FinishError)?.kind, .unsupported, "\($0)") }
                XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), bytes, "\(name) was changed")
                continue
            }
            do {
                let r = try MP4Finisher.finish(path: path)
                XCTFail("\(name) was finished: \(r)")
            } catch {
                let text = "\(error)"
                XCTAssertTrue(text.hasPrefix("cannot finish \(path): "), text)
                XCTAssertTrue(text.hasSuffix("(the file is damaged; it is left as it was)"), text)
                XCTAssertTrue(text.contains(" at offset "), "\(name): the box and its offset: \(text)")
                XCTAssertEqual(error.kind, .damaged, "\(name): \(error)")
                XCTAssertNotNil(error.box, "\(name): \(error)")
                XCTAssertNotNil(error.offset, "\(name): \(error)")
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), bytes, "\(name) was changed")
        }
    }

    /// The issue's 24-byte file: the free box at offset 8 claims 2^63-1 bytes.
    func testIssueFileNamesTheFreeBoxAtOffset8() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("reel-fuzz-\(getpid())-a.mp4.part").path
        try Data(contentsOf: URL(fileURLWithPath: Self.corpora + "/finish/issue-24-bytes-free-size-2p63")).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        XCTAssertThrowsError(try MP4Finisher.finish(path: path)) {
            XCTAssertEqual(($0 as? MP4FinishError)?.box, "free")
            XCTAssertEqual(($0 as? MP4FinishError)?.offset, 8)
            XCTAssertEqual("\($0)", "cannot finish \(path): free at offset 8 claims 9223372036854775807 bytes but the file ends 16 bytes after its start (the file is damaged; it is left as it was)")
        }
    }

    /// A program built next to the test bundle (.build/<triple>/debug/).
    static func binary(_ name: String) throws -> URL {
        let argv0 = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidates = [argv0.deletingLastPathComponent().appendingPathComponent(name),
                          Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent(name),
                          root.appendingPathComponent(".build/debug/\(name)")]
        for url in candidates where FileManager.default.isExecutableFile(atPath: url.path) { return url }
        XCTFail("\(name) not found (looked at \(candidates.map(\.path))); build it with 'swift build --build-tests'")
        throw XCTSkip("no \(name) binary")
    }
}
