import Foundation
import ReelControl
import ReelConfig
import ReelFuzz
import XCTest

/// `make test` replays every seed and regression input of `make fuzz` (Tests/fuzz/request,
/// Tests/fuzz/config) through the fuzzers' checks, so a crash found once stays fixed.
final class FuzzReplayTests: XCTestCase {
    static let corpora = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("fuzz").path

    private func replay(_ name: String, atLeast minimum: Int, _ check: ([UInt8]) -> [String]) throws {
        let files = try FuzzChecks.inputs(at: Self.corpora + "/" + name)
        // The corpus must be there: an empty directory would make this test pass vacuously.
        XCTAssertGreaterThanOrEqual(files.count, minimum, "Tests/fuzz/\(name) lost its inputs")
        for file in files {
            let problems = check(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
            XCTAssertEqual(problems, [], "\(file)")
        }
    }

    func testRequestCorpusAndRegressionsPassTheChecks() throws {
        try replay("request", atLeast: 30, FuzzChecks.request)
    }

    func testConfigCorpusAndRegressionsPassTheChecks() throws {
        try replay("config", atLeast: 25, FuzzChecks.config)
    }

    /// The checks see what the server sees: blank lines skipped, each line parsed on its own.
    func testRequestCheckSplitsLinesAsTheServerDoes() {
        XCTAssertEqual(FuzzChecks.request(Array("\n \r\n\t\n".utf8)), [])
        XCTAssertEqual(FuzzChecks.request(Array("{\"v\":1,\"cmd\":\"status\"}\n{\"v\":1,\"cmd\":\"nope\"}".utf8)), [])
    }
}
