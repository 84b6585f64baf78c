import Foundation
import ReelCore
import XCTest

@testable import ReelControl

/// A start's pre-roll on the wire (issue 25): `preRollNs` on `start` only, its bounds, and the
/// reply's and status's figures.
final class PreRollProtocolTests: XCTestCase {
    private func parse(_ line: String) -> Result<Request, RequestParseError> { Wire.parseRequest(Array(line.utf8)) }

    func testPreRollReachesStartOnly() throws {
        let start = try parse(#"{"v":1,"cmd":"start","preRollNs":1500000000}"#).get()
        XCTAssertEqual(start.preRollNs, 1_500_000_000)
        XCTAssertEqual(try Wire.text(start), #"{"v":1,"cmd":"start","preRollNs":1500000000}"#)
        XCTAssertNil(try parse(#"{"v":1,"cmd":"resume","preRollNs":5}"#).get().preRollNs)
        XCTAssertNil(try parse(#"{"v":1,"cmd":"start"}"#).get().preRollNs)
        XCTAssertEqual(try parse(#"{"v":1,"cmd":"start","preRollNs":0}"#).get().preRollNs, 0)
    }

    func testBadPreRollsNameTheField() {
        for (field, why) in [#""preRollNs":-1"#: "out of range", #""preRollNs":1.5"#: "integer number of nanoseconds",
                             #""preRollNs":"1.5""#: "integer number of nanoseconds", #""preRollNs":300000000001"#: "out of range"] {
            guard case let .failure(e) = parse(#"{"v":1,"id":4,"cmd":"start",\#(field)}"#) else { return XCTFail(field) }
            XCTAssertEqual(e.error.code, ControlError.Code.badRequest, field)
            XCTAssertTrue(e.error.message.contains(#""preRollNs""#) && e.error.message.contains(why), "\(field): \(e.error.message)")
        }
    }

    func testTheAskedInstantReachesStartOnly() throws {
        let start = try parse(#"{"v":1,"cmd":"start","atNs":81234000000}"#).get()
        XCTAssertEqual(start.atNs, 81_234_000_000)
        XCTAssertEqual(try Wire.text(start), #"{"v":1,"cmd":"start","atNs":81234000000}"#)
        XCTAssertNil(try parse(#"{"v":1,"cmd":"resume","atNs":5}"#).get().atNs)
        // Any integer parses (reeld bounds it: PreRoll.askedAt); anything else names the field.
        XCTAssertEqual(try parse(#"{"v":1,"cmd":"start","atNs":-9223372036854775808}"#).get().atNs, .min)
        for field in [#""atNs":1.5"#, #""atNs":"1""#, #""atNs":9223372036854775808"#, #""atNs":[]"#] {
            guard case let .failure(e) = parse(#"{"v":1,"id":4,"cmd":"start",\#(field)}"#) else { return XCTFail(field) }
            XCTAssertEqual(e.error.code, ControlError.Code.badRequest, field)
            XCTAssertTrue(e.error.message.contains(#""atNs""#), "\(field): \(e.error.message)")
        }
    }

    func testReplyAndStatusCarryThePreRoll() throws {
        var r = Reply(ok: true, file: "/o/a.mp4.part")
        r.startNs = 10
        r.preRollNs = 1_500_000_000
        XCTAssertEqual(try Wire.text(r), #"{"v":1,"ok":true,"file":"/o/a.mp4.part","startNs":10,"preRollNs":1500000000}"#)
        let back = try JSONDecoder().decode(Reply.self, from: Data(try Wire.text(r).utf8))
        XCTAssertEqual(back.preRollNs, 1_500_000_000)
        var st = StatusInfo(state: .idle, file: nil, segments: [], recordedNs: 0, frames: 0, droppedFrames: 0, audioSamples: 0,
                            lastFile: nil, lastError: nil, video: "v", audio: "a", uptimeNs: 1)
        st.preRollNs = 700_000_000
        let text = try Wire.text(st)
        XCTAssertTrue(text.contains(#""preRollNs":700000000"#), text)
        XCTAssertEqual(try JSONDecoder().decode(StatusInfo.self, from: Data(text.utf8)).preRollNs, 700_000_000)
    }
}
