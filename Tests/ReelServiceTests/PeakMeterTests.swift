@testable import ReelService
import XCTest

final class PeakMeterTests: XCTestCase {
    func testDbfsOfSamplePeaks() {
        XCTAssertEqual(Recorder.dbfs(32768), 0.0)
        XCTAssertEqual(Recorder.dbfs(16384), -6.0)  // 0.5 of full scale: -6.02 dB
        XCTAssertEqual(Recorder.dbfs(3277), -20.0)  // 0.1
        XCTAssertEqual(Recorder.dbfs(1), -90.3)
        XCTAssertNil(Recorder.dbfs(0), "digital silence is -inf: null")
    }
}
