import Foundation
import ReelCore
import XCTest

@testable import ReelControl

/// `snapshot` on the wire: the request's `width`, the reply's image object (base64 JPEG), the
/// start reply's `startNs` and the status object's `standby`.
final class SnapshotProtocolTests: XCTestCase {
    func testSnapshotRequest() throws {
        XCTAssertEqual(try Wire.text(Request(id: 2, cmd: .snapshot, width: 160)), #"{"v":1,"id":2,"cmd":"snapshot","width":160}"#)
        XCTAssertEqual(try Wire.parseRequest(Array(#"{"v":1,"cmd":"snapshot","width":160}"#.utf8)).get().width, 160)
        XCTAssertNil(try Wire.parseRequest(Array(#"{"v":1,"cmd":"snapshot"}"#.utf8)).get().width)
        // Only `snapshot` carries a width.
        XCTAssertNil(try Wire.parseRequest(Array(#"{"v":1,"cmd":"status","width":160}"#.utf8)).get().width)
        for bad in [#"{"v":1,"cmd":"snapshot","width":"wide"}"#, #"{"v":1,"cmd":"snapshot","width":8}"#, #"{"v":1,"cmd":"snapshot","width":1.5}"#] {
            guard case let .failure(e) = Wire.parseRequest(Array(bad.utf8)) else { return XCTFail(bad) }
            XCTAssertEqual(e.error.message, #"bad "width": must be an integer of at least 16 (pixels; or left out for the captured size)"#, bad)
        }
    }

    func testSnapshotReplyRoundTrips() throws {
        var r = Reply(id: 2, ok: true)
        r.snapshot = SnapshotInfo(width: 2, height: 2, capturedNs: 123, jpeg: [0xFF, 0xD8, 0xFF, 0xD9])
        let text = try Wire.text(r)
        XCTAssertEqual(text, #"{"v":1,"id":2,"ok":true,"snapshot":{"width":2,"height":2,"capturedNs":123,"bytes":4,"jpeg":"/9j/2Q=="}}"#)
        let back = try JSONDecoder().decode(Reply.self, from: Data(text.utf8))
        XCTAssertEqual(back.snapshot?.jpegBytes, [0xFF, 0xD8, 0xFF, 0xD9])
        var s = Reply(id: 1, ok: true, file: "/v/a.mp4.part")
        s.startNs = 42
        XCTAssertEqual(try Wire.text(s), #"{"v":1,"id":1,"ok":true,"file":"/v/a.mp4.part","startNs":42}"#)
    }

    func testStatusCarriesStandby() throws {
        var st = StatusInfo(state: .idle, file: nil, segments: [], recordedNs: 0, frames: 0, droppedFrames: 0, audioSamples: 0,
                            lastFile: nil, lastError: nil, video: "none", audio: "none", uptimeNs: 1)
        XCTAssertTrue(try Wire.text(st).hasSuffix(#","remainingNs":null,"standby":null,"originNs":null,"preRollNs":null}"#))
        st.standby = "warm"
        st.originNs = 81_234_000_000
        XCTAssertTrue(try Wire.text(st).hasSuffix(#","standby":"warm","originNs":81234000000,"preRollNs":null}"#))
        let back = try JSONDecoder().decode(StatusInfo.self, from: Data(try Wire.text(st).utf8))
        XCTAssertEqual(back.standby, "warm")
        XCTAssertEqual(back.originNs, 81_234_000_000)
    }
}
