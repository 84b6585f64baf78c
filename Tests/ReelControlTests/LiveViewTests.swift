import Foundation
import Glibc
import Synchronization
import XCTest

@testable import ReelControl

/// The live-view pieces: status fields, event lines, the event bus, `events` subscriptions and
/// the `status --watch` screen.
final class LiveViewTests: XCTestCase {
    // MARK: Wire format

    func testStatusFromAnOlderReeldDecodesWithoutTheLiveViewFields() throws {
        let old = #"{"state":"idle","file":null,"segments":[],"recordedNs":0,"frames":0,"droppedFrames":0,"audioSamples":0,"lastFile":null,"lastError":null,"video":"none","audio":"none","uptimeNs":1}"#
        let s = try JSONDecoder().decode(StatusInfo.self, from: Data(old.utf8))
        XCTAssertEqual(s.audioPeakDbfs, [])
        XCTAssertNil(s.bytesWritten)
        XCTAssertNil(s.freeBytes)
    }

    func testLiveViewFieldsAreWrittenInOrderAndRoundTrip() throws {
        var s = StatusInfo(state: .recording, file: "/o/a.mp4.part", segments: [], recordedNs: 0, frames: 0, droppedFrames: 0,
                           audioSamples: 0, lastFile: nil, lastError: nil, video: "v", audio: "a", uptimeNs: 1)
        s.audioPeakDbfs = [-6.0, nil]
        s.bytesWritten = 123_456
        s.freeBytes = 9_000_000_000
        let text = try Wire.text(s)
        XCTAssertTrue(text.hasSuffix(#""uptimeNs":1,"audioPeakDbfs":[-6.0,null],"bytesWritten":123456,"freeBytes":9000000000,"takes":[],"remainingNs":null,"standby":null,"originNs":null,"preRollNs":null}"#), text)
        XCTAssertEqual(try JSONDecoder().decode(StatusInfo.self, from: Data(text.utf8)), s)

        var idle = s
        idle.audioPeakDbfs = []
        idle.bytesWritten = nil
        idle.freeBytes = nil
        XCTAssertTrue(try Wire.text(idle).hasSuffix(#""audioPeakDbfs":[],"bytesWritten":null,"freeBytes":null,"takes":[],"remainingNs":null,"standby":null,"originNs":null,"preRollNs":null}"#))
    }

    func testEventLines() throws {
        XCTAssertEqual(try Wire.text(ControlEvent(event: "state", state: .recording, file: "/o/a.mp4.part", at: 42)),
                       #"{"v":1,"event":"state","state":"recording","file":"/o/a.mp4.part","at":42}"#)
        XCTAssertEqual(try Wire.text(ControlEvent(event: "segment", file: "/o/a.mp4.part", segment: 1, at: 43)),
                       #"{"v":1,"event":"segment","file":"/o/a.mp4.part","segment":1,"at":43}"#)
        XCTAssertEqual(try Wire.text(ControlEvent(event: "state", state: .idle, at: 44)),
                       #"{"v":1,"event":"state","state":"idle","file":null,"at":44}"#)
        XCTAssertEqual(try Wire.text(ControlEvent(event: "error", message: "disk \"x\" full", at: 45)),
                       #"{"v":1,"event":"error","file":null,"message":"disk \"x\" full","at":45}"#)
        XCTAssertEqual(try Wire.text(ControlEvent(event: "overflow", at: 46)), #"{"v":1,"event":"overflow","at":46}"#)
        let e = ControlEvent(event: "finished", file: "/o/a.mp4", at: 47)
        XCTAssertEqual(try JSONDecoder().decode(ControlEvent.self, from: Data(try Wire.line(e))), e)
        XCTAssertEqual(try Wire.text(Reply(id: 3, ok: true, subscribed: true)), #"{"v":1,"id":3,"ok":true,"subscribed":true}"#)
        XCTAssertEqual(try Wire.parseRequest(Array(#"{"v":1,"id":2,"cmd":"events"}"#.utf8)).get(), Request(id: 2, cmd: .events))
    }

    // MARK: EventBus

    private func texts(_ lines: [[UInt8]]) -> [String] {
        lines.map { String(decoding: $0.dropLast(), as: UTF8.self) }
    }

    func testBusDeliversInOrderToEverySubscriberAndWakes() {
        let bus = EventBus(capacity: 8)
        let woken = Counter()
        bus.addWaker { woken.add() }
        bus.publish(ControlEvent(event: "state", state: .idle, at: 1))  // nobody listens: dropped
        let a = bus.subscribe(), b = bus.subscribe()
        for at in 2...4 { bus.publish(ControlEvent(event: "state", state: .recording, at: Int64(at))) }
        let (la, ea) = bus.take(a)
        XCTAssertFalse(ea)
        XCTAssertEqual(texts(la).map { $0.suffix(5) }, [#"t":2}"#, #"t":3}"#, #"t":4}"#])
        XCTAssertEqual(bus.take(a).lines.count, 0)
        XCTAssertEqual(bus.take(b).lines.count, 3)
        XCTAssertEqual(woken.value, 3)
        bus.unsubscribe(a)
        XCTAssertEqual(bus.subscriberCount, 1)
        XCTAssertTrue(bus.take(a).ended)
    }

    func testSlowSubscriberIsOverflowedWithoutHarmingOthers() {
        let bus = EventBus(capacity: 3)
        let slow = bus.subscribe(), fast = bus.subscribe()
        for at in 1...10 {
            bus.publish(ControlEvent(event: "state", state: .recording, at: Int64(at)))
            XCTAssertEqual(bus.take(fast).lines.count, 1)
        }
        let (lines, ended) = bus.take(slow)
        XCTAssertTrue(ended)
        XCTAssertEqual(lines.count, 4)
        XCTAssertTrue(texts(lines)[2].hasSuffix(#""at":3}"#))
        XCTAssertTrue(texts(lines)[3].hasPrefix(#"{"v":1,"event":"overflow","at":"#), texts(lines)[3])
        XCTAssertEqual(bus.subscriberCount, 1, "the overflowed subscriber is removed once its lines are taken")
    }

    // MARK: Server subscriptions

    func testEventsTurnsTheConnectionIntoAStream() throws {
        let bus = EventBus()
        let f = try Fixture(events: bus)
        let client = try f.client()
        XCTAssertEqual(try client.send(Request(id: 1, cmd: .status), timeoutMs: 5000).status?.state, .idle)
        let reply = try client.subscribe(timeoutMs: 5000, id: 7)
        XCTAssertEqual(reply, Reply(id: 7, ok: true, subscribed: true))
        XCTAssertEqual(bus.subscriberCount, 1)
        // Anything sent after `events` is ignored; events keep coming.
        _ = try? client.exchange(Array(#"{"v":1,"cmd":"status"}"#.utf8), timeoutMs: 0)
        bus.publish(ControlEvent(event: "state", state: .recording, file: "/o/a.mp4.part", at: 5))
        bus.publish(ControlEvent(event: "finished", file: "/o/a.mp4", at: 6))
        XCTAssertEqual(String(decoding: try client.nextLine(timeoutMs: 5000), as: UTF8.self),
                       #"{"v":1,"event":"state","state":"recording","file":"/o/a.mp4.part","at":5}"#)
        XCTAssertEqual(String(decoding: try client.nextLine(timeoutMs: 5000), as: UTF8.self),
                       #"{"v":1,"event":"finished","file":"/o/a.mp4","at":6}"#)
        XCTAssertEqual(f.recorder.calls, [.status], "neither `events` nor requests after it reach the handler")
    }

    func testLeavingSubscriberIsUnsubscribed() throws {
        let bus = EventBus()
        let f = try Fixture(events: bus)
        do {
            let client = try f.client()
            _ = try client.subscribe(timeoutMs: 5000)
            XCTAssertEqual(bus.subscriberCount, 1)
        }
        XCTAssertTrue(f.logs.waitFor("control client closed"))
        XCTAssertEqual(bus.subscriberCount, 0)
    }

    func testServerWithoutBusRefusesEvents() throws {
        let f = try Fixture()
        let reply = try f.client().subscribe(timeoutMs: 5000)
        XCTAssertFalse(reply.ok)
        XCTAssertEqual(reply.error?.code, ControlError.Code.failed)
    }

    func testSubscriberThatStopsReadingIsDroppedWithOverflowAndNeverBlocksThePublisher() throws {
        let bus = EventBus(capacity: 16)
        let f = try Fixture(events: bus)
        let client = try f.client()
        _ = try client.subscribe(timeoutMs: 5000)
        // ~3 MB of events: far more than the socket buffers and the server's 64 KiB backlog hold.
        let message = String(repeating: "x", count: 200)
        let count = 15_000
        for at in 0..<count { bus.publish(ControlEvent(event: "error", message: message, at: Int64(at))) }
        var received = 0
        var last = ""
        while true {
            do {
                last = String(decoding: try client.nextLine(timeoutMs: 5000), as: UTF8.self)
                received += 1
            } catch let error as SocketError {
                XCTAssertEqual(error.kind, .connectionClosed)
                break
            }
        }
        XCTAssertTrue(last.hasPrefix(#"{"v":1,"event":"overflow""#), last)
        XCTAssertLessThan(received, count)
        XCTAssertEqual(bus.subscriberCount, 0)
    }

    // MARK: The watch screen
}

private final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
