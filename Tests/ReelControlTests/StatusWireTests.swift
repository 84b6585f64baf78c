import Foundation
import ReelCore
import XCTest

@testable import ReelControl

/// The status object's exact bytes on the wire (key order, explicit `null`s, number formats), pinned
/// so that how `StatusInfo` is declared and written can change without the wire changing.
final class StatusWireTests: XCTestCase {
    /// Every field set, strings that need escaping, peaks with decimals, a silent channel and an open take.
    static let full: StatusInfo = {
        var s = StatusInfo(state: .paused, file: "/srv/reel/a \"b\"\n.mp4.part",
                           segments: [SegmentInfo(index: 0, durationNs: 2_000_000_000), SegmentInfo(index: 1, durationNs: 1_500_000_001)],
                           recordedNs: 3_500_000_001, frames: 105, droppedFrames: 2, audioSamples: 168_000,
                           lastFile: "/srv/reel/é🎬.mp4", lastError: "tab\there\\", video: "test 640x360 30/1 yuyv",
                           audio: "test 48000 Hz 2 ch", uptimeNs: Int64.max, audioFilledSamples: 480)
        s.audioPeakDbfs = [-6.0, nil, -0.1, -12.3, 0.0, -90.3]
        s.bytesWritten = 1_234_567
        s.freeBytes = 9_000_000_000_000
        s.takes = [TakeInfo(number: 1, label: "intro", title: "intro", startNs: 0, durationNs: 2_000_000_000),
                   TakeInfo(number: 2, label: nil, title: "Take 2", startNs: 2_000_000_000, durationNs: nil)]
        s.remainingNs = 0
        s.standby = "warm"
        s.originNs = -5
        return s
    }()

    static let fullText = #"{"state":"paused","file":"/srv/reel/a \"b\"\n.mp4.part","segments":[{"index":0,"durationNs":2000000000},{"index":1,"durationNs":1500000001}],"recordedNs":3500000001,"frames":105,"droppedFrames":2,"audioSamples":168000,"audioFilledSamples":480,"lastFile":"/srv/reel/é🎬.mp4","lastError":"tab\there\\","video":"test 640x360 30/1 yuyv","audio":"test 48000 Hz 2 ch","uptimeNs":9223372036854775807,"audioPeakDbfs":[-6.0,null,-0.1,-12.3,0.0,-90.3],"bytesWritten":1234567,"freeBytes":9000000000000,"takes":[{"number":1,"label":"intro","title":"intro","startNs":0,"durationNs":2000000000},{"number":2,"label":null,"title":"Take 2","startNs":2000000000,"durationNs":null}],"remainingNs":0,"standby":"warm","originNs":-5,"preRollNs":null}"#

    /// As little set as the type allows.
    static let sparse = StatusInfo(state: .idle, file: nil, segments: [], recordedNs: 0, frames: 0, droppedFrames: 0,
                                   audioSamples: 0, lastFile: nil, lastError: nil, video: "", audio: "", uptimeNs: 0)

    static let sparseText = #"{"state":"idle","file":null,"segments":[],"recordedNs":0,"frames":0,"droppedFrames":0,"audioSamples":0,"audioFilledSamples":0,"lastFile":null,"lastError":null,"video":"","audio":"","uptimeNs":0,"audioPeakDbfs":[],"bytesWritten":null,"freeBytes":null,"takes":[],"remainingNs":null,"standby":null,"originNs":null,"preRollNs":null}"#

    func testFullStatusBytes() throws {
        XCTAssertEqual(try Wire.text(Self.full), Self.fullText)
        XCTAssertEqual(try JSONDecoder().decode(StatusInfo.self, from: Data(Self.fullText.utf8)), Self.full)
    }

    func testSparseStatusBytes() throws {
        XCTAssertEqual(try Wire.text(Self.sparse), Self.sparseText)
        XCTAssertEqual(try JSONDecoder().decode(StatusInfo.self, from: Data(Self.sparseText.utf8)), Self.sparse)
    }

    func testTakeAndSegmentBytes() throws {
        XCTAssertEqual(try Wire.text(Self.full.takes[0]), #"{"number":1,"label":"intro","title":"intro","startNs":0,"durationNs":2000000000}"#)
        XCTAssertEqual(try Wire.text(Self.full.takes[1]), #"{"number":2,"label":null,"title":"Take 2","startNs":2000000000,"durationNs":null}"#)
        XCTAssertEqual(try Wire.text(Self.full.segments[1]), #"{"index":1,"durationNs":1500000001}"#)
    }

    /// Inside a reply, after and before other keys (commas in the right places).
    func testStatusAndTakesInsideAReply() throws {
        var r = Reply.success(id: 3, file: "/srv/reel/a.mp4", status: Self.full)
        r.takes = [Self.full.takes[1]]
        r.startNs = 7
        let text = try Wire.text(r)
        XCTAssertEqual(text, #"{"v":1,"id":3,"ok":true,"file":"/srv/reel/a.mp4","status":"# + Self.fullText
                       + #","takes":[{"number":2,"label":null,"title":"Take 2","startNs":2000000000,"durationNs":null}],"startNs":7}"#)
        XCTAssertEqual(try JSONDecoder().decode(Reply.self, from: Data(text.utf8)), r)
    }

    /// A peak that is not a finite number goes out as `null` (JSON has no infinity).
    func testNonFinitePeakIsNull() throws {
        var s = Self.sparse
        s.audioPeakDbfs = [-.infinity, .nan, -1.5]
        XCTAssertTrue(try Wire.text(s).contains(#","audioPeakDbfs":[null,null,-1.5],"#))
    }

    /// Fields added after the first release decode from an older reeld's reply that lacks them,
    /// while a field that was always there is still required.
    func testOlderRepliesDecodeAndRequiredFieldsStayRequired() throws {
        let old = #"{"state":"recording","file":"/o/a.mp4.part","segments":[],"recordedNs":5,"frames":1,"droppedFrames":0,"audioSamples":2,"lastFile":null,"lastError":null,"video":"v","audio":"a","uptimeNs":1}"#
        let s = try JSONDecoder().decode(StatusInfo.self, from: Data(old.utf8))
        XCTAssertEqual(s.audioFilledSamples, 0)
        XCTAssertEqual(s.audioPeakDbfs, [])
        XCTAssertEqual(s.takes, [])
        XCTAssertNil(s.originNs)
        let nulls = old.replacingOccurrences(of: #""uptimeNs":1}"#, with: #""uptimeNs":1,"audioFilledSamples":null,"takes":null}"#)
        XCTAssertEqual(try JSONDecoder().decode(StatusInfo.self, from: Data(nulls.utf8)), s)
        let noFrames = old.replacingOccurrences(of: #""frames":1,"#, with: "")
        XCTAssertThrowsError(try JSONDecoder().decode(StatusInfo.self, from: Data(noFrames.utf8)))
    }

    /// The writer behind it, on any synthesized `Codable`: declaration order, every nil as `null`
    /// (in fields and in arrays), and a value that writes nothing is an error, not broken JSON.
    func testEncoderWritesDeclarationOrderAndEveryNil() throws {
        struct Probe: Codable, OrderedJSON { var z: Int; var a: Bool?; var m: [Int?]; var d: Double?; var u: UInt8 }
        XCTAssertEqual(try Wire.text(Probe(z: 1, a: nil, m: [nil, 2], d: nil, u: 255)), #"{"z":1,"a":null,"m":[null,2],"d":null,"u":255}"#)
        XCTAssertEqual(try Wire.text(Probe(z: -1, a: true, m: [], d: 0.5, u: 0)), #"{"z":-1,"a":true,"m":[],"d":0.5,"u":0}"#)
        struct Nothing: Encodable, OrderedJSON { func encode(to encoder: any Encoder) throws {} }
        XCTAssertThrowsError(try Wire.line(Nothing()))
    }
}
