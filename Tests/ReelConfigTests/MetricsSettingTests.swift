@testable import ReelConfig
import XCTest

/// `metrics_file` in the setting table (the file itself: ReelServiceTests' MetricsTests).
final class MetricsSettingTests: XCTestCase {
    func testTheSettingTakesAnAbsolutePathOrNothing() throws {
        XCTAssertNil(SettingKey.metricsFile.problem(.string("")))
        XCTAssertNil(SettingKey.metricsFile.problem(.string("/var/lib/node_exporter/textfile_collector/reel.prom")))
        XCTAssertNotNil(SettingKey.metricsFile.problem(.string("reel.prom")))
        let s = try DaemonSettings.resolve(configPath: "/dev/null", environment: ["REEL_METRICS_FILE": "/tmp/x.prom"], flags: [:])
        XCTAssertEqual(s.values.metricsFile, "/tmp/x.prom")
        XCTAssertNil(DaemonSettings().values.metricsFile, "metrics_file is off by default")
    }
}
