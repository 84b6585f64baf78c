import Foundation
import XCTest

@testable import ReelControl
import ReelCore
import ReelSystem

/// `preview` and `levels`: the feed's subscribers, lines and limits, and the server's streams.
final class LiveFeedTests: XCTestCase {
    private func decode(_ line: [UInt8]) throws -> LiveLine {
        XCTAssertEqual(line.last, UInt8(ascii: "\n"))
        return try JSONDecoder().decode(LiveLine.self, from: Data(line.dropLast()))
    }

    private func window(_ samples: [Int16], channels: Int, time: Nanos) -> LevelsWindow {
        var w = LevelsWindow(sampleRate: 48_000, channels: channels)
        samples.withUnsafeBufferPointer { _ = w.feed($0, from: 0, time: time) }
        return w
    }

    // MARK: The feed

    func testAtMostEightPreviewsAndOutOfRangeIsABadRequestNamingTheLimit() throws {
        let feed = LiveFeed()
        feed.setCameraSource { PreviewCamera(width: 640, height: 360, fps: Rational(30)) }
        for _ in 0..<8 { _ = try feed.subscribePreview(width: nil, fps: nil).get() }
        guard case let .failure(.busy(why)) = feed.subscribePreview(width: nil, fps: nil) else { return XCTFail("a 9th preview") }
        XCTAssertTrue(why.contains("8"), why)
        _ = feed.subscribeLevels()  // levels are not previews: no limit here
        let other = LiveFeed()
        other.setCameraSource { PreviewCamera(width: 640, height: 360, fps: Rational(30)) }
        guard case let .failure(.badRequest(why)) = other.subscribePreview(width: 1000, fps: nil) else { return XCTFail("too wide") }
        XCTAssertTrue(why.contains("the camera's width"), why)
        other.setLimits(PreviewLimits(maxWidth: 1280, maxFps: 5))
        guard case let .failure(.badRequest(slow)) = other.subscribePreview(width: nil, fps: 6) else { return XCTFail("too fast") }
        XCTAssertTrue(slow.contains("preview_max_fps"), slow)
        XCTAssertEqual(try other.subscribePreview(width: nil, fps: nil).get().grant, PreviewGrant(width: 640, height: 360, fps: 5))
    }

    func testASlowSubscriberGetsTheNewestFrameWithWhatItMissed() throws {
        let feed = LiveFeed()
        let a = try feed.subscribePreview(width: 320, fps: 10).get().id
        let b = try feed.subscribePreview(width: 320, fps: 10).get().id
        XCTAssertNil(feed.take(a))
        for n in 1...3 { feed.publish(jpeg: [0xff, 0xd8, UInt8(n)], width: 320, height: 180, capturedNs: Nanos(n) * 100, to: [a, b]) }
        let line = try decode(try XCTUnwrap(feed.take(a)))
        XCTAssertEqual(line.event, "preview")
        XCTAssertEqual(line.seq, 3); XCTAssertEqual(line.dropped, 2)
        XCTAssertEqual(line.width, 320); XCTAssertEqual(line.height, 180); XCTAssertEqual(line.capturedNs, 300)
        XCTAssertEqual(line.jpegBytes, [0xff, 0xd8, 3]); XCTAssertEqual(line.bytes, 3)
        XCTAssertNil(feed.take(a), "at most one frame waits")
        feed.publish(jpeg: [4], width: 320, height: 180, capturedNs: 400, to: [a])
        let next = try decode(try XCTUnwrap(feed.take(a)))
        XCTAssertEqual(next.seq, 4); XCTAssertEqual(next.dropped, 0)
        XCTAssertEqual(try decode(try XCTUnwrap(feed.take(b))).capturedNs, 300, "b was not offered frame 4")
        let text = String(decoding: try XCTUnwrap({ feed.publish(jpeg: [5], width: 320, height: 180, capturedNs: 500, to: [a]); return feed.take(a) }()), as: UTF8.self)
        XCTAssertTrue(text.hasPrefix(#"{"v":1,"event":"preview","seq":5,"width":320,"height":180,"capturedNs":500,"dropped":0,"bytes":1,"jpeg":"BQ==","at":"#), text)
    }

    func testPreviewStateOncePerChangeAndAtOnceForANewSubscriberWhileNotLive() throws {
        let feed = LiveFeed()
        let a = try feed.subscribePreview(width: nil, fps: nil).get().id
        XCTAssertEqual(try feed.subscribePreview(width: nil, fps: nil).get().grant.height, 0, "no camera: height 0")
        feed.setPreviewLive(false, reason: "no camera is open")
        feed.setPreviewLive(false, reason: "no camera is open")
        let s = try decode(try XCTUnwrap(feed.take(a)))
        XCTAssertEqual(s.event, "preview_state"); XCTAssertEqual(s.live, false); XCTAssertEqual(s.reason, "no camera is open")
        XCTAssertNil(feed.take(a), "once per change")
        let late = try feed.subscribePreview(width: nil, fps: nil).get().id
        XCTAssertEqual(try decode(try XCTUnwrap(feed.take(late))).reason, "no camera is open")
        feed.setPreviewLive(true, reason: nil)
        let live = try decode(try XCTUnwrap(feed.take(a)))
        XCTAssertEqual(live.live, true); XCTAssertNil(live.reason)
    }

    func testLevelsLinesCarryTheNewestWindowOnly() throws {
        let feed = LiveFeed()
        XCTAssertFalse(feed.wantsLevels)
        let id = feed.subscribeLevels()
        XCTAssertTrue(feed.wantsLevels)
        XCTAssertNil(feed.take(id))
        let loud = [Int16](repeating: 16384, count: 4800)  // -6.0 dBFS on both channels
        feed.publishLevels(window([Int16](repeating: 0, count: 4800), channels: 2, time: 1_000))
        feed.publishLevels(window(loud, channels: 2, time: 2_000))
        let text = String(decoding: try XCTUnwrap(feed.take(id)), as: UTF8.self)
        XCTAssertTrue(text.hasPrefix(#"{"v":1,"event":"levels","peakDbfs":[-6.0,-6.0],"rmsDbfs":[-6.0,-6.0],"capturedNs":2000,"at":"#), text)
        XCTAssertNil(feed.take(id), "latest wins: the older window is not sent")
        feed.unsubscribe(id)
        XCTAssertFalse(feed.wantsLevels)
    }

    // MARK: The server

    func testPreviewAndLevelsTurnConnectionsIntoStreams() throws {
        let feed = LiveFeed()
        feed.setCameraSource { PreviewCamera(width: 1280, height: 720, fps: Rational(30)) }
        let f = try Fixture(live: feed)
        let client = try f.client()
        var request = Request(id: 3, cmd: .preview, width: 320, fps: 5)
        XCTAssertEqual(try client.send(request, timeoutMs: 5000).preview, PreviewInfo(width: 320, height: 180, fps: 5))
        let id = feed.waitForPreview(until: nil)[0].id
        feed.publish(jpeg: [1, 2], width: 320, height: 180, capturedNs: 42, to: [id])
        let line = try decode(try client.nextLine(timeoutMs: 5000) + [UInt8(ascii: "\n")])
        XCTAssertEqual(line.capturedNs, 42); XCTAssertEqual(line.jpegBytes, [1, 2])

        let levels = try f.client()
        let reply = try levels.send(Request(id: 4, cmd: .levels), timeoutMs: 5000)
        XCTAssertEqual(reply.subscribed, true); XCTAssertNil(reply.preview)
        feed.publishLevels(window([Int16](repeating: 0, count: 2400), channels: 1, time: 77))
        XCTAssertEqual(try decode(try levels.nextLine(timeoutMs: 5000) + [UInt8(ascii: "\n")]).peakDbfs, [-120.0])

        request.width = 2000
        let refused = try f.client().send(request, timeoutMs: 5000)
        XCTAssertEqual(refused.error?.code, ControlError.Code.badRequest)
        XCTAssertTrue(refused.error?.message.contains("16 to 1280 (the setting preview_max_width") ?? false, "\(refused)")
        XCTAssertEqual(f.recorder.calls, [], "the server answers these itself")
    }

    /// A subscriber that reads nothing loses frames; another client's status and the publisher never wait.
    func testASubscriberThatDoesNotReadDelaysNobody() throws {
        let feed = LiveFeed()
        let f = try Fixture(live: feed)
        let stuck = try f.client()
        _ = try stuck.send(Request(id: 1, cmd: .preview), timeoutMs: 5000)
        let id = feed.waitForPreview(until: nil)[0].id
        let frame = [UInt8](repeating: 7, count: 300_000)  // ~400 KB a line: the socket fills at once
        let t0 = Sys.monotonicNs()
        for n in 0..<200 { feed.publish(jpeg: frame, width: 640, height: 360, capturedNs: Nanos(n), to: [id]) }
        XCTAssertLessThan(Sys.monotonicNs() - t0, 5 * nanosPerSecond, "publishing never waits for the reader")
        let other = try f.client()
        let a = Sys.monotonicNs()
        XCTAssertNotNil(try other.send(Request(id: 2, cmd: .status), timeoutMs: 5000).status)
        XCTAssertLessThan(Sys.monotonicNs() - a, 1 * nanosPerSecond)
        // When it reads at last, it gets a frame or two buffered, then the newest with the count missed.
        var last: LiveLine?
        while let raw = try? stuck.nextLine(timeoutMs: 500) { last = try decode(raw + [UInt8(ascii: "\n")]) }
        XCTAssertEqual(last?.seq, 200)
        XCTAssertGreaterThan(last?.dropped ?? 0, 100)
    }

    /// The idle rule closes a connection that neither sends nor reads; a stream waits by design.
    func testStreamsAreNotClosedByTheIdleRule() throws {
        let feed = LiveFeed()
        let f = try Fixture(limits: ControlLimits(idleTimeoutMs: 200), live: feed)
        let preview = try f.client()
        _ = try preview.send(Request(id: 1, cmd: .preview), timeoutMs: 5000)
        let levels = try f.client()
        _ = try levels.send(Request(id: 2, cmd: .levels), timeoutMs: 5000)
        let idle = try f.client()
        _ = try idle.send(Request(id: 3, cmd: .status), timeoutMs: 5000)
        XCTAssertTrue(f.logs.waitFor("idle for"), "the plain client is closed after 200 ms")
        XCTAssertThrowsError(try idle.nextLine(timeoutMs: 2000))
        let id = feed.waitForPreview(until: nil)[0].id
        feed.publish(jpeg: [9], width: 640, height: 360, capturedNs: 1, to: [id])
        XCTAssertEqual(try decode(try preview.nextLine(timeoutMs: 5000) + [UInt8(ascii: "\n")]).jpegBytes, [9])
        feed.publishLevels(window([Int16](repeating: 0, count: 2400), channels: 1, time: 5))
        XCTAssertEqual(try decode(try levels.nextLine(timeoutMs: 5000) + [UInt8(ascii: "\n")]).capturedNs, 5)
    }

    func testPreviewRequestParsing() {
        guard case let .success(r) = Wire.parseRequest(Array(#"{"v":1,"cmd":"preview","width":320,"fps":5}"#.utf8)) else { return XCTFail() }
        XCTAssertEqual(r.width, 320); XCTAssertEqual(r.fps, 5)
        guard case let .failure(e) = Wire.parseRequest(Array(#"{"v":1,"cmd":"preview","fps":0}"#.utf8)) else { return XCTFail() }
        XCTAssertTrue(e.error.message.contains("\"fps\""), e.error.message)
        guard case .failure = Wire.parseRequest(Array(#"{"v":1,"cmd":"preview","fps":"x"}"#.utf8)) else { return XCTFail() }
        guard case let .success(s) = Wire.parseRequest(Array(#"{"v":1,"cmd":"status","fps":5}"#.utf8)) else { return XCTFail() }
        XCTAssertNil(s.fps, "fps means something to preview only")
    }
}
