import Foundation
import Logging
import ReelControl
import ReelCore
@testable import ReelService
import ReelStorage
import XCTest

/// The metrics file (`metrics_file`): its text and how it is replaced. Tests/e2e/test_metrics.py
/// reads it with prometheus_client's parser while recording.
final class MetricsTests: XCTestCase {
    private func status(_ state: RecorderState) -> StatusInfo {
        var st = StatusInfo(state: state, file: nil, segments: [], recordedNs: 2_500_000_000, frames: 75, droppedFrames: 3,
                            audioSamples: 120_000, lastFile: nil, lastError: nil, video: "test", audio: "test",
                            uptimeNs: 10 * nanosPerSecond, audioFilledSamples: 480)
        st.bytesWritten = 123_456
        st.freeBytes = 9_000_000_000
        return st
    }

    func testTheTextHasEveryMetricWithHelpAndType() {
        let text = PrometheusText.render(status(.paused), errors: [.storage: 2], syncLatencyNs: 1_500_000)
        let lines = Set(text.split(separator: "\n").map(String.init))
        for want in ["reel_state{state=\"paused\"} 1", "reel_state{state=\"recording\"} 0", "reel_state{state=\"idle\"} 0",
                     "reel_recorded_seconds 2.500000", "reel_frames 75", "reel_dropped_frames 3", "reel_audio_filled_samples 480",
                     "reel_bytes_written 123456", "reel_free_bytes 9000000000", "reel_fragment_sync_seconds 0.001500",
                     "reel_errors_total{kind=\"storage\"} 2", "reel_errors_total{kind=\"start\"} 0", "# TYPE reel_errors_total counter"] {
            XCTAssertTrue(lines.contains(want), "missing \(want) in\n\(text)")
        }
        for kind in ErrorKind.allCases { XCTAssertTrue(lines.contains { $0.hasPrefix("reel_errors_total{kind=\"\(kind.rawValue)\"} ") }, kind.rawValue) }
        XCTAssertTrue(lines.contains { $0.hasPrefix("reel_build_info{protocol_version=\"\(protocolVersion)\",swift=\"6.") && $0.hasSuffix("} 1") })
        // Each metric: HELP, then TYPE, then its samples.
        let names = lines.filter { !$0.hasPrefix("#") }.map { String($0.prefix { $0 != "{" && $0 != " " }) }
        for name in Set(names) {
            XCTAssertTrue(lines.contains { $0.hasPrefix("# HELP \(name) ") }, name)
            XCTAssertTrue(lines.contains { $0.hasPrefix("# TYPE \(name) ") }, name)
        }
        // Unknown values are left out, not written as 0.
        var st = status(.idle)
        st.freeBytes = nil
        let idle = PrometheusText.render(st, errors: [:], syncLatencyNs: nil)
        XCTAssertFalse(idle.contains("reel_free_bytes"))
        XCTAssertFalse(idle.contains("reel_fragment_sync_seconds"))
    }

    /// With outbox_dir: what waits for upload; without one (or unreadable), nothing about it.
    func testTheOutboxMetrics() {
        var c = OutboxCensus()
        c.files = 3
        c.bytes = 4_500_000
        c.oldestModifiedNs = 1_000 * nanosPerSecond
        let text = PrometheusText.render(status(.idle), errors: [:], syncLatencyNs: nil, outbox: (c, 4_600 * nanosPerSecond + 5))
        let lines = Set(text.split(separator: "\n").map(String.init))
        for want in ["reel_outbox_files 3", "reel_outbox_bytes 4500000", "reel_outbox_oldest_age_seconds 3600",
                     "# TYPE reel_outbox_files gauge", "# TYPE reel_outbox_oldest_age_seconds gauge", "reel_errors_total{kind=\"outbox\"} 0"] {
            XCTAssertTrue(lines.contains(want), "missing \(want) in\n\(text)")
        }
        XCTAssertFalse(PrometheusText.render(status(.idle), errors: [:], syncLatencyNs: nil).contains("reel_outbox_"))
        XCTAssertFalse(PrometheusText.render(status(.idle), errors: [:], syncLatencyNs: nil, outbox: (nil, 0)).contains("reel_outbox_"))
    }

    func testTheFileIsReplacedAndRemovedAndAFailureIsCounted() throws {
        let dir = NSTemporaryDirectory() + "reel-metrics-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let errors = ErrorCounts()
        let file = MetricsFile(path: dir + "/reel.prom", logger: Logger(label: "test"), errors: errors)
        func inode() throws -> Int { try FileManager.default.attributesOfItem(atPath: dir + "/reel.prom")[.systemFileNumber] as! Int }
        file.write("a 1\n")
        let first = try inode()
        file.write("a 2\n")
        // Renamed over, not rewritten in place: a reader has the old file or the new, never half of one.
        XCTAssertNotEqual(try inode(), first)
        XCTAssertEqual(try String(contentsOfFile: dir + "/reel.prom", encoding: .utf8), "a 2\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), ["reel.prom"])
        let old = umask(0o077)
        file.write("a 2\n")
        umask(old)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: dir + "/reel.prom")[.posixPermissions] as? Int, 0o644,
                       "node_exporter must be able to read it whatever reeld's umask")
        file.remove()
        file.write("a 3\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/reel.prom"), "a write after remove brought the file back")
        let bad = MetricsFile(path: dir + "/no-such-dir/reel.prom", logger: Logger(label: "test"), errors: errors)
        bad.write("a 1\n")
        bad.write("a 1\n")
        XCTAssertEqual(errors.snapshot[.metrics], 2)
    }
}
