import Foundation
import Logging
import ReelControl
import ReelCore
import ReelMedia
import ReelPipeline
import ReelSystem
@testable import ReelService
import Synchronization
import XCTest

/// What the services did, in order (shared with their closures).
private final class Log<T: Sendable>: Sendable {
    private let m = Mutex<[T]>([])
    func append(_ e: T) { m.withLock { $0.append(e) } }
    var all: [T] { m.withLock { $0 } }
}

final class ServiceGroupTests: XCTestCase {
    private func group(_ log: Log<String>, failing: String? = nil) -> ServiceGroup {
        struct Failed: Error {}
        let services = ["socket", "supervisor", "hooks", "recorder"].map { name in
            ServiceGroup.Service(name, start: {
                if name == failing { throw Failed() }
                log.append("start \(name)")
            }, stop: { _ in log.append("stop \(name)") })
        }
        return ServiceGroup(services, logger: Logger(label: "test"))
    }

    func testServicesStartInOrderAndStopInReverseOnce() throws {
        let log = Log<String>()
        let g = group(log)
        try g.start()
        // SIGTERM and a second signal (or stop and SIGTERM) at once: one shutdown, both return after it.
        let both = DispatchGroup()
        for _ in 0..<2 { DispatchQueue.global().async(group: both) { g.shutdown() } }
        XCTAssertEqual(both.wait(timeout: .now() + 10), .success)
        g.shutdown()
        XCTAssertEqual(log.all, ["start socket", "start supervisor", "start hooks", "start recorder",
                                             "stop recorder", "stop hooks", "stop supervisor", "stop socket"])
    }

    func testAFailedStartStopsWhatStartedInReverse() {
        let log = Log<String>()
        XCTAssertThrowsError(try group(log, failing: "hooks").start())
        XCTAssertEqual(log.all, ["start socket", "start supervisor", "stop supervisor", "stop socket"])
    }

    func testEveryStopGetsOneDeadlineWithinTheBudget() throws {
        let deadlines = Log<Nanos>()
        let g = ServiceGroup((0..<3).map { i in ServiceGroup.Service("s\(i)", stop: { d in deadlines.append(d) }) },
                             logger: Logger(label: "test"))
        try g.start()
        let before = SystemClock.now()
        g.shutdown()
        let d = deadlines.all
        XCTAssertEqual(d.count, 3)
        XCTAssertEqual(Set(d).count, 1, "one deadline for the whole shutdown")
        XCTAssertGreaterThanOrEqual(d[0], before + ServiceGroup.shutdownBudgetNs)
        XCTAssertLessThanOrEqual(d[0], SystemClock.now() + ServiceGroup.shutdownBudgetNs)
    }

    /// systemd SIGKILLs reeld at TimeoutStopSec: the shutdown budget must end before it, with
    /// time left to exit.
    func testTheShutdownBudgetEndsBeforeTheUnitsTimeoutStopSec() throws {
        let unit = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../systemd/reeld.service")
        let text = try String(contentsOf: unit, encoding: .utf8)
        let line = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("TimeoutStopSec=") })
        let seconds = try XCTUnwrap(Int64(line.dropFirst("TimeoutStopSec=".count).dropLast()), "\(line): expected NNs")
        XCTAssertTrue(line.hasSuffix("s"), String(line))
        XCTAssertLessThanOrEqual(ServiceGroup.shutdownBudgetNs + 5 * nanosPerSecond, seconds * nanosPerSecond,
                                 "reeld's shutdown budget must end at least 5 s before the unit's \(line)")
        XCTAssertLessThan(Recorder.stopWaitNs, ServiceGroup.shutdownBudgetNs)
    }
}

final class RecorderShutdownTests: XCTestCase {
    /// A directory of its own for the test's recordings (removed after it) and paced synthetic
    /// sources at 64x64, 10 fps, 48 kHz mono into it.
    private func scratchRecording() throws -> (String, RecorderConfig) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("reel-shutdown-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        let config = RecorderConfig(outputDir: dir,
                                    video: .test(VideoFormat(width: 64, height: 64, fps: Rational(10), pixelFormat: .i420)),
                                    audio: .test(AudioFormat(sampleRate: 48000, channels: 1), skewPpm: 0),
                                    paced: true, h264: H264Settings(), aac: AACSettings())
        return (dir, config)
    }

    /// Once shutdown begins (SIGTERM), `start` is refused, also one that was waiting behind the
    /// final stop: it used to run after it, and reeld's exit then cut it into a .part.
    func testStartIsRefusedOnceShutdownBegins() throws {
        let (dir, config) = try scratchRecording()
        let recorder = Recorder(config: config, logger: Logger(label: "test"))
        let first = recorder.handle(Request(cmd: .start, name: "before"))
        XCTAssertTrue(first.ok, "\(String(describing: first.error))")
        recorder.shutdown(deadline: SystemClock.now() + 60 * nanosPerSecond)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(dir)/before.mp4"), "the recording was finished")
        let late = recorder.handle(Request(cmd: .start, name: "after"))
        if late.ok { _ = recorder.handle(Request(cmd: .stop)) }
        XCTAssertFalse(late.ok)
        XCTAssertEqual(late.error?.code, "wrong_state")
        XCTAssertTrue(late.error?.message.contains("shutting down") ?? false, "\(String(describing: late.error))")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/after.mp4.part"))
    }

    /// A start under way when shutdown begins (here: waiting for standby's devices to open) is
    /// waited for, and the recording it makes is finished before shutdown returns. Shutdown
    /// returned at once instead (nothing was recording yet): the start went on after it, and
    /// reeld's exit then cut that recording into a .part.
    func testShutdownWaitsForAStartUnderWayAndFinishesItsRecording() throws {
        var (dir, config) = try scratchRecording()
        config.standby = true
        let recorder = Recorder(config: config, logger: Logger(label: "test"))
        let t0 = SystemClock.now()
        // Standby is on but its thread not started: the start waits for the devices.
        let started = Promise<Reply>()
        NamedThread.start("test-start") { started.fulfill(recorder.handle(Request(cmd: .start, name: "during"))) }
        XCTAssertTrue(recorder.waitForLifecycle(until: t0 + 10 * nanosPerSecond) { $0.phase == .starting })
        let shutDown = Promise<Bool>()
        NamedThread.start("test-shutdown") {
            recorder.shutdown(deadline: SystemClock.now() + 60 * nanosPerSecond)
            shutDown.fulfill(started.wait(until: 0) != nil)  // was the start answered before shutdown returned?
        }
        XCTAssertTrue(recorder.waitForLifecycle(until: t0 + 10 * nanosPerSecond) { $0.closing })
        recorder.startStandby()  // the devices open: the start goes on
        let answeredFirst = try XCTUnwrap(shutDown.wait(until: SystemClock.now() + 90 * nanosPerSecond), "shutdown did not return")
        let reply = try XCTUnwrap(started.wait(until: SystemClock.now() + 10 * nanosPerSecond), "the start was not answered")
        if recorder.statusInfo().state != .idle { _ = recorder.handle(Request(cmd: .stop)) }
        XCTAssertTrue(answeredFirst, "shutdown returned while a start was under way")
        XCTAssertTrue(reply.ok, "\(String(describing: reply.error))")
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(dir)/during.mp4"), "its recording was finished")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/during.mp4.part"))
    }

    /// A recording that stops by itself (here: at its length cap) as shutdown begins is waited
    /// for: shutdown's own stop is refused (the pipeline is stopping already), and shutdown
    /// returned then, before the file was finished; reeld's exit would cut it into a .part.
    func testShutdownWaitsForARecordingStoppingByItself() throws {
        let (dir, config) = try scratchRecording()
        let recorder = Recorder(config: config, logger: Logger(label: "test"))
        let events = recorder.events
        let subscriber = events.subscribe()
        let capped = Promise<Bool>()
        events.addWaker {
            let lines = events.take(subscriber).lines.map { String(decoding: $0, as: UTF8.self) }
            if lines.contains(where: { $0.contains("\"cap_reached\"") }) { capped.fulfill(true) }
        }
        let reply = recorder.handle(Request(cmd: .start, name: "capped", maxDurationNs: 300_000_000))
        XCTAssertTrue(reply.ok, "\(String(describing: reply.error))")
        XCTAssertNotNil(capped.wait(until: SystemClock.now() + 30 * nanosPerSecond), "no cap_reached")
        recorder.shutdown(deadline: SystemClock.now() + 60 * nanosPerSecond)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(dir)/capped.mp4"), "shutdown returned before the file was finished")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/capped.mp4.part"))
    }
}
