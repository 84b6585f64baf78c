import Foundation
import ReelCore
import XCTest

@testable import ReelControl

final class ProtocolTests: XCTestCase {
    func text(_ value: some Encodable) throws -> String { try Wire.text(value) }

    func testRequestEncodesAsDocumented() throws {
        XCTAssertEqual(try text(Request(id: 7, cmd: .start, name: "clip")), #"{"v":1,"id":7,"cmd":"start","name":"clip"}"#)
        XCTAssertEqual(try text(Request(cmd: .status)), #"{"v":1,"cmd":"status"}"#)
        XCTAssertEqual(try Wire.line(Request(cmd: .pause)).last, UInt8(ascii: "\n"))
    }

    func testRepliesEncodeAsDocumented() throws {
        XCTAssertEqual(try text(Reply.success(id: 7, file: "/srv/reel/clip.mp4.part")),
                       #"{"v":1,"id":7,"ok":true,"file":"/srv/reel/clip.mp4.part"}"#)
        XCTAssertEqual(try text(Reply.failure(.wrongState("cannot pause: not recording"), id: 7)),
                       #"{"v":1,"id":7,"ok":false,"error":{"code":"wrong_state","message":"cannot pause: not recording"}}"#)
        XCTAssertEqual(try text(Reply.failure(.busy("later"))), #"{"v":1,"ok":false,"error":{"code":"busy","message":"later"}}"#)
    }

    func testStatusWritesNullsAndRoundTrips() throws {
        let status = StatusInfo(state: .idle, file: nil, segments: [SegmentInfo(index: 0, durationNs: 2_000_000_000)],
                                recordedNs: 2_000_000_000, frames: 60, droppedFrames: 0, audioSamples: 96_000,
                                lastFile: nil, lastError: nil, video: "test 640x360 30/1 yuyv",
                                audio: "test 48000 Hz 1 ch", uptimeNs: 9)
        let json = try text(status)
        XCTAssertEqual(json, #"{"state":"idle","file":null,"segments":[{"index":0,"durationNs":2000000000}],"recordedNs":2000000000,"frames":60,"droppedFrames":0,"audioSamples":96000,"audioFilledSamples":0,"lastFile":null,"lastError":null,"video":"test 640x360 30/1 yuyv","audio":"test 48000 Hz 1 ch","uptimeNs":9,"audioPeakDbfs":[],"bytesWritten":null,"freeBytes":null,"takes":[],"remainingNs":null,"standby":null,"originNs":null,"preRollNs":null}"#)
        let reply = Reply.success(id: 3, file: "/srv/reel/a.mp4", status: status)
        let decoded = try JSONDecoder().decode(Reply.self, from: Data(try Wire.line(reply)))
        XCTAssertEqual(decoded, reply)
    }

    func parse(_ line: String) -> Result<Request, RequestParseError> { Wire.parseRequest(Array(line.utf8)) }

    func assertBad(_ line: String, id: Int? = nil, mentions text: String, file: StaticString = #filePath, line number: UInt = #line) {
        switch parse(line) {
        case .success(let request):
            XCTFail("expected bad_request for \(line), got \(request)", file: file, line: number)
        case .failure(let problem):
            XCTAssertEqual(problem.error.code, ControlError.Code.badRequest, file: file, line: number)
            XCTAssertEqual(problem.id, id, file: file, line: number)
            XCTAssertTrue(problem.error.message.contains(text), "\(problem.error.message) lacks \(text)", file: file, line: number)
        }
    }

    func testParsesValidRequests() {
        XCTAssertEqual(try parse(#"{"v":1,"id":7,"cmd":"start","name":"clip"}"#).get(), Request(id: 7, cmd: .start, name: "clip"))
        XCTAssertEqual(try parse(#" {"cmd":"status","v":1,"extra":[1,2]} "#).get(), Request(cmd: .status))
        XCTAssertEqual(try parse(#"{"v":1,"cmd":"stop","id":null,"name":"ignored"}"#).get(), Request(cmd: .stop))
        XCTAssertEqual(try parse("{\"v\":1,\"cmd\":\"pause\"}\r").get(), Request(cmd: .pause))
    }

    func testRejectsBadRequestsWithPreciseMessages() {
        assertBad("{not json", mentions: "malformed")
        assertBad("[1,2]", mentions: "malformed")
        assertBad(#"{"v":1,"id":4,"cmd":"record"}"#, id: 4, mentions: #"unknown command "record""#)
        assertBad(#"{"v":2,"id":5,"cmd":"status"}"#, id: 5, mentions: "unsupported protocol version 2")
        assertBad(#"{"v":"1","cmd":"status"}"#, mentions: "unsupported protocol version")
        assertBad(#"{"cmd":"status"}"#, mentions: #"missing "v""#)
        assertBad(#"{"v":1,"id":6}"#, id: 6, mentions: #"missing "cmd""#)
        assertBad(#"{"v":1,"cmd":7}"#, mentions: "unknown command")
        assertBad(#"{"v":1,"id":"x","cmd":"status"}"#, mentions: #"bad "id""#)
        assertBad(#"{"v":1,"cmd":"start","name":5}"#, mentions: #"bad "name""#)
        assertBad(#"{"v":1,"id":8,"cmd":"start","name":"../etc/x"}"#, id: 8, mentions: "must not start with '.'")
        assertBad(#"{"v":1,"cmd":"start","name":"a/b"}"#, mentions: "must not contain '/'")
        assertBad(#"{"v":1,"cmd":"start","name":""}"#, mentions: "empty")
    }

    func testSocketPathPrecedence() {
        let env = ["REEL_SOCKET": "/tmp/env.sock"]
        XCTAssertEqual(SocketPath.resolve(explicit: "/tmp/flag.sock", environment: env), "/tmp/flag.sock")
        XCTAssertEqual(SocketPath.resolve(explicit: nil, environment: env), "/tmp/env.sock")
        XCTAssertEqual(SocketPath.resolve(explicit: "", environment: env), "/tmp/env.sock")
        XCTAssertEqual(SocketPath.resolve(explicit: nil, environment: [:]), "/run/reel/reeld.sock")
        XCTAssertEqual(SocketPath.resolve(explicit: nil, environment: ["REEL_SOCKET": ""]), "/run/reel/reeld.sock")
    }
}

final class JSONWriterTests: XCTestCase {
    func testEscapesAndRoundTripsAwkwardStrings() throws {
        let awkward = "quote\" backslash\\ newline\n tab\t bell\u{7} del\u{7f} é 🎬 /slash"
        let reply = Reply.failure(.failed(awkward), id: -3)
        let line = try Wire.line(reply)
        XCTAssertEqual(line.filter { $0 == UInt8(ascii: "\n") }.count, 1, "one line only")
        XCTAssertEqual(try JSONDecoder().decode(Reply.self, from: Data(line)), reply)
        XCTAssertTrue(String(decoding: line, as: UTF8.self).contains(#"\u0007"#))
        let empty = StatusInfo(state: .stopping, file: "", segments: [], recordedNs: 0, frames: 0, droppedFrames: 0,
                               audioSamples: 0, lastFile: nil, lastError: nil, video: "", audio: "", uptimeNs: Int64.max)
        XCTAssertEqual(try JSONDecoder().decode(StatusInfo.self, from: Data(try Wire.line(empty))), empty)
    }

    func testControlsAndSetRequestsAndReplies() throws {
        guard case let .success(r) = Wire.parseRequest(Array(#"{"v":1,"id":3,"cmd":"set","args":{"brightness":200,"white_balance_automatic":false,"power_line_frequency":"50 Hz"}}"#.utf8)) else {
            return XCTFail("set did not parse")
        }
        XCTAssertEqual(r.args, ["brightness": .int(200), "white_balance_automatic": .bool(false), "power_line_frequency": .text("50 Hz")])
        XCTAssertEqual(try Wire.text(r), #"{"v":1,"id":3,"cmd":"set","args":{"brightness":200,"power_line_frequency":"50 Hz","white_balance_automatic":false}}"#)
        guard case let .success(c) = Wire.parseRequest(Array(#"{"v":1,"cmd":"controls","args":{"x":1}}"#.utf8)) else { return XCTFail() }
        XCTAssertNil(c.args, "args only travel with set")
        for (line, want) in [(#"{"v":1,"cmd":"set"}"#, "'set' needs \"args\""), (#"{"v":1,"cmd":"set","args":{}}"#, "'set' needs \"args\""),
                             (#"{"v":1,"cmd":"set","args":{"a":1.5}}"#, "bad \"args\""), (#"{"v":1,"cmd":"set","args":[1]}"#, "bad \"args\"")] {
            guard case let .failure(e) = Wire.parseRequest(Array(line.utf8)) else { XCTFail(line); continue }
            XCTAssertEqual(e.error.code, ControlError.Code.badRequest)
            XCTAssertTrue(e.error.message.hasPrefix(want), e.error.message)
        }
        var reply = Reply(id: 3, ok: true)
        reply.controls = [CameraControlInfo(name: "power_line_frequency", label: "Power Line Frequency", id: 0x0098_0918, type: .menu, min: 0, max: 2,
                                            step: 1, defaultValue: 1, value: 1, menu: [.init(index: 0, name: "Disabled"), .init(index: 1, name: "50 Hz")])]
        let text = try Wire.text(reply)
        XCTAssertEqual(text, #"{"v":1,"id":3,"ok":true,"controls":[{"name":"power_line_frequency","label":"Power Line Frequency","id":9963800,"type":"menu","min":0,"max":2,"step":1,"default":1,"value":1,"menu":[{"index":0,"name":"Disabled"},{"index":1,"name":"50 Hz"}],"flags":[]}]}"#)
        XCTAssertEqual(try JSONDecoder().decode(Reply.self, from: Data(text.utf8)), reply)
        XCTAssertEqual(ControlsText.render(reply.controls!), """
                   power_line_frequency 0x00980918 (menu)   : min=0 max=2 default=1 value=1 (50 Hz)
                                        0: Disabled
                                        1: 50 Hz

        """)
    }
}
