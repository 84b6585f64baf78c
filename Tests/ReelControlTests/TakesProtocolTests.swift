import Foundation
import ReelCore
import XCTest

@testable import ReelControl

/// Labels, the takes list and the length cap on the wire (issue 13).
final class TakesProtocolTests: XCTestCase {
    private func parse(_ line: String) -> Result<Request, RequestParseError> { Wire.parseRequest(Array(line.utf8)) }

    func testLabelAndCapReachStartAndResumeOnly() throws {
        let start = try parse(#"{"v":1,"cmd":"start","label":"intro","maxDurationNs":2000000000}"#).get()
        XCTAssertEqual(start.label, "intro")
        XCTAssertEqual(start.maxDurationNs, 2_000_000_000)
        XCTAssertEqual(try parse(#"{"v":1,"cmd":"resume","label":"second take","maxDurationNs":5}"#).get().label, "second take")
        XCTAssertNil(try parse(#"{"v":1,"cmd":"resume","maxDurationNs":5}"#).get().maxDurationNs)
        XCTAssertNil(try parse(#"{"v":1,"cmd":"pause","label":"x"}"#).get().label)
        XCTAssertEqual(try parse(#"{"v":1,"cmd":"takes"}"#).get().cmd, .takes)
        XCTAssertEqual(try Wire.text(start), #"{"v":1,"cmd":"start","label":"intro","maxDurationNs":2000000000}"#)
    }

    func testBadLabelsAndCapsNameTheField() {
        let bad = [#""label":"""#: "empty", #""label":5"#: "must be a string", "\"label\":\"a\\u0007b\"": "control characters",
                   "\"label\":\"\(String(repeating: "é", count: 128))\"": "longer than 255",
                   #""maxDurationNs":-1"#: "out of range", #""maxDurationNs":2.5"#: "integer number of nanoseconds",
                   #""maxDurationNs":604800000000001"#: "out of range"]
        for (field, why) in bad {
            guard case let .failure(e) = parse(#"{"v":1,"id":4,"cmd":"start",\#(field)}"#) else { return XCTFail(field) }
            XCTAssertEqual(e.error.code, ControlError.Code.badRequest, field)
            XCTAssertEqual(e.id, 4)
            let name = field.hasPrefix(#""label""#) ? #""label""# : #""maxDurationNs""#
            XCTAssertTrue(e.error.message.contains(name) && e.error.message.contains(why), "\(field): \(e.error.message)")
        }
        XCTAssertNil(Wire.labelProblem(String(repeating: "a", count: 255)))
        XCTAssertNotNil(Wire.labelProblem("a\u{85}b"))  // C1 controls too
        XCTAssertNil(Wire.labelProblem("Zweite Einstellung, «gut»"))
    }

    /// A chapter title cannot pretend to be another: bidirectional overrides and isolates,
    /// zero-width and other invisible format characters are refused, naming the code point and
    /// where it is (1-based, in characters of the label).
    func testLabelsRefuseInvisibleAndDirectionChangingCharacters() {
        let refused: [UInt32] = [0x00AD, 0x061C, 0x180E, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D,
                                 0x202E, 0x2060, 0x2061, 0x2064, 0x2066, 0x2067, 0x2068, 0x2069, 0x206A, 0x206F, 0xFEFF, 0xFFF9, 0xFFFB]
        for cp in refused {
            let label = "ab" + String(Character(Unicode.Scalar(cp)!)) + "cd"
            let hex = String(cp, radix: 16, uppercase: true)
            let name = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            guard let problem = Wire.labelProblem(label) else { XCTFail("\(name) accepted"); continue }
            XCTAssertTrue(problem.contains(#"bad "label""#) && problem.contains(name) && problem.contains("character 3"), problem)
            guard case let .failure(e) = parse(#"{"v":1,"cmd":"resume","label":"ab\\#(name.replacingOccurrences(of: "U+", with: "u"))cd"}"#) else {
                XCTFail("\(name) accepted on the wire"); continue
            }
            XCTAssertTrue(e.error.message.contains(name), e.error.message)
        }
        // "Intro" followed by an override that makes "4pm.gpj" read as "jpg.mp4": the override is named.
        XCTAssertEqual(Wire.labelProblem("Intro\u{202E}4pm.gpj")?.contains("U+202E RIGHT-TO-LEFT OVERRIDE at character 6"), true)
        for ok in ["Take 2 — « gut »", "שלום עולם", "مرحبا", "日本語のテイク", "café", "👍"] { XCTAssertNil(Wire.labelProblem(ok), ok) }
    }

    func testSetResetClearsAllOrNamedControls() throws {
        XCTAssertEqual(try parse(#"{"v":1,"cmd":"set","reset":true}"#).get().reset, .all)
        XCTAssertEqual(try parse(#"{"v":1,"cmd":"set","reset":["brightness","contrast"]}"#).get().reset, .only(["brightness", "contrast"]))
        XCTAssertNil(try parse(#"{"v":1,"cmd":"status","reset":true}"#).get().reset)
        XCTAssertEqual(try Wire.text(Request(cmd: .set, reset: .all)), #"{"v":1,"cmd":"set","reset":true}"#)
        XCTAssertEqual(try Wire.text(Request(cmd: .set, reset: .only(["gain"]))), #"{"v":1,"cmd":"set","reset":["gain"]}"#)
        for (line, why) in [(#"{"v":1,"cmd":"set","reset":[]}"#, #"bad "reset""#), (#"{"v":1,"cmd":"set","reset":5}"#, #"bad "reset""#),
                            (#"{"v":1,"cmd":"set","reset":false}"#, #"needs "args""#),
                            (#"{"v":1,"cmd":"set","reset":true,"args":{"gain":1}}"#, "not both")] {
            guard case let .failure(e) = parse(line) else { return XCTFail(line) }
            XCTAssertTrue(e.error.message.contains(why), "\(line): \(e.error.message)")
        }
    }

    func testRequestsCarryTheClientsTimeout() throws {
        XCTAssertEqual(try parse(#"{"v":1,"cmd":"undo","timeoutMs":3000}"#).get().timeoutMs, 3000)
        XCTAssertEqual(try Wire.text(Request(cmd: .pause, timeoutMs: 15000)), #"{"v":1,"cmd":"pause","timeoutMs":15000}"#)
        for bad in [#""timeoutMs":0"#, #""timeoutMs":-5"#, #""timeoutMs":3600001"#, #""timeoutMs":"5""#] {
            guard case let .failure(e) = parse(#"{"v":1,"cmd":"undo",\#(bad)}"#) else { return XCTFail(bad) }
            XCTAssertTrue(e.error.message.contains(#"bad "timeoutMs""#), e.error.message)
        }
    }

    func testUndoCarriesTheTakeItExpects() throws {
        XCTAssertEqual(try parse(#"{"v":1,"cmd":"undo","take":3}"#).get().take, 3)
        XCTAssertNil(try parse(#"{"v":1,"cmd":"undo"}"#).get().take)
        XCTAssertNil(try parse(#"{"v":1,"cmd":"pause","take":3}"#).get().take, "only undo takes it")
        XCTAssertEqual(try Wire.text(Request(cmd: .undo, take: 2)), #"{"v":1,"cmd":"undo","take":2}"#)
        for (field, why) in [#""take":0"#: "not a take number", #""take":-1"#: "not a take number", #""take":"2""#: "must be an integer"] {
            guard case let .failure(e) = parse(#"{"v":1,"cmd":"undo",\#(field)}"#) else { return XCTFail(field) }
            XCTAssertEqual(e.error.code, ControlError.Code.badRequest, field)
            XCTAssertTrue(e.error.message.contains(#""take""#) && e.error.message.contains(why), "\(field): \(e.error.message)")
        }
    }

    func testTakesInStatusRepliesAndEvents() throws {
        var s = StatusInfo(state: .recording, file: "/o/a.mp4.part", segments: [], recordedNs: 0, frames: 0, droppedFrames: 0,
                           audioSamples: 0, lastFile: nil, lastError: nil, video: "v", audio: "a", uptimeNs: 1)
        s.takes = [TakeInfo(number: 1, label: "intro", title: "intro", startNs: 0, durationNs: 1_000_000_000),
                   TakeInfo(number: 2, label: nil, title: "Take 2", startNs: 1_000_000_000, durationNs: nil)]
        s.remainingNs = 500
        let text = try Wire.text(s)
        XCTAssertTrue(text.hasSuffix(#""takes":[{"number":1,"label":"intro","title":"intro","startNs":0,"durationNs":1000000000},{"number":2,"label":null,"title":"Take 2","startNs":1000000000,"durationNs":null}],"remainingNs":500,"standby":null,"originNs":null,"preRollNs":null}"#), text)
        XCTAssertEqual(try JSONDecoder().decode(StatusInfo.self, from: Data(text.utf8)), s)
        var r = Reply(id: 2, ok: true)
        r.takes = s.takes
        XCTAssertTrue(try Wire.text(r).hasPrefix(#"{"v":1,"id":2,"ok":true,"takes":[{"number":1,"#))
        XCTAssertEqual(try Wire.text(ControlEvent(event: ControlEvent.Kind.takeKept, file: "/o/a.mp4.part", take: s.takes[0], at: 7)),
                       #"{"v":1,"event":"take_kept","file":"/o/a.mp4.part","take":1,"label":"intro","title":"intro","startNs":0,"durationNs":1000000000,"at":7}"#)
        XCTAssertEqual(try Wire.text(ControlEvent(event: ControlEvent.Kind.capReached, file: "/o/a.mp4.part", maxDurationNs: 2_000_000_000, at: 8)),
                       #"{"v":1,"event":"cap_reached","file":"/o/a.mp4.part","maxDurationNs":2000000000,"at":8}"#)
    }

    func testLengthCapParsesExactly() {
        XCTAssertEqual(LengthCap.parse("2"), 2_000_000_000)
        XCTAssertEqual(LengthCap.parse("2.5"), 2_500_000_000)
        XCTAssertEqual(LengthCap.parse("0.001"), 1_000_000)
        XCTAssertEqual(LengthCap.parse("90.125"), 90_125_000_000)
        XCTAssertEqual(LengthCap.parse("0"), 0)
        XCTAssertEqual(LengthCap.parse("604800"), 604_800_000_000_000)
        for bad in ["", "1.2345", "2.", ".5", "-1", "+2", "1e3", "604800.001", " 2", "0x10", "٣"] {
            XCTAssertNil(LengthCap.parse(bad), bad)
        }
    }
}
