import Foundation
import XCTest
@testable import ReelCore

/// The live preview's and the levels meter's decisions, on a manual clock.
final class PreviewPlanTests: XCTestCase {
    let ms: Nanos = 1_000_000
    let hd = PreviewCamera(width: 1280, height: 720, fps: Rational(30))

    // MARK: What a request is given

    func testDefaultsAndTheCameraAspect() throws {
        let g = try PreviewGrant.check(width: nil, fps: nil, camera: hd, limits: PreviewLimits()).get()
        XCTAssertEqual(g, PreviewGrant(width: 640, height: 360, fps: 10))
        let odd = try PreviewGrant.check(width: 321, fps: 15, camera: hd, limits: PreviewLimits()).get()
        XCTAssertEqual(odd, PreviewGrant(width: 320, height: 180, fps: 15), "even, the height in proportion")
    }

    func testOutOfRangeNamesTheLimitAndWhereItComesFrom() {
        func why(_ w: Int?, _ f: Int?, _ cam: PreviewCamera?, _ l: PreviewLimits = PreviewLimits()) -> String {
            if case let .failure(m) = PreviewGrant.check(width: w, fps: f, camera: cam, limits: l) { return m.message }
            return "granted"
        }
        XCTAssertTrue(why(1281, nil, PreviewCamera(width: 1920, height: 1080, fps: Rational(30))).contains("preview_max_width"))
        XCTAssertTrue(why(700, nil, PreviewCamera(width: 640, height: 360, fps: Rational(30))).contains("out of range 16 to 640 (the camera's width"))
        XCTAssertTrue(why(15, nil, hd).contains("16"))
        XCTAssertTrue(why(nil, 16, hd).contains("1 to 15 (the setting preview_max_fps)"))
        XCTAssertTrue(why(nil, 6, PreviewCamera(width: 640, height: 360, fps: Rational(5))).contains("1 to 5 (the camera's frame rate)"))
        XCTAssertTrue(why(nil, 0, hd).contains("bad \"fps\""))
        XCTAssertTrue(why(400, nil, nil, PreviewLimits(maxWidth: 320, maxFps: 15)).contains("preview_max_width"))
        XCTAssertEqual(why(320, 5, PreviewCamera(width: 640, height: 360, fps: Rational(30000, 1001))), "granted")
        XCTAssertTrue(why(nil, 30, PreviewCamera(width: 640, height: 360, fps: Rational(30000, 1001)), PreviewLimits(maxWidth: 1280, maxFps: 60))
            .contains("1 to 29 (the camera's frame rate)"))
    }

    func testWithoutACameraTheHeightIsZeroUntilFramesCome() throws {
        let g = try PreviewGrant.check(width: 800, fps: 5, camera: nil, limits: PreviewLimits()).get()
        XCTAssertEqual(g, PreviewGrant(width: 800, height: 0, fps: 5))
    }

    // MARK: Which frame goes to whom

    /// Frames of a 30 fps camera with up to ±5 ms of jitter, for `seconds`.
    private func frames(fps: Int64 = 30, seconds: Int64, from t0: Nanos = 7_000 * 1_000_000) -> [Nanos] {
        (0..<(fps * seconds)).map { n in t0 + rescale(n, nanosPerSecond, fps) + [0, 5, -5, 3, -2][Int(n % 5)] * ms }
    }

    func testALowerRateTakesEveryKthFrameByCaptureTime() {
        var plan = PreviewPlan()
        plan.sync([(id: 1, width: 640, fps: 10), (id: 2, width: 640, fps: 15), (id: 3, width: 320, fps: 30)])
        var taken: [UInt64: [Int]] = [:]
        var encodings = 0
        for (n, t) in frames(seconds: 3).enumerated() {
            let groups = plan.frame(capturedAt: t, camera: hd)
            encodings += groups.count
            for g in groups { for id in g.ids { taken[id, default: []].append(n) } }
        }
        XCTAssertEqual(taken[1], Array(stride(from: 0, to: 90, by: 3)), "every third frame at 10 of 30 fps")
        XCTAssertEqual(taken[2], Array(stride(from: 0, to: 90, by: 2)), "every second frame at 15 of 30 fps")
        XCTAssertEqual(taken[3]?.count, 90, "every frame at the camera's rate")
        // One encoding per frame and width: 320 on every frame, 640 on those 1 or 2 take (n % 2 == 0 or n % 3 == 0).
        XCTAssertEqual(encodings, 90 + 60)
    }

    func testSubscribersAtOneWidthShareAnEncodingAndWidthsNeverExceedTheCamera() {
        var plan = PreviewPlan()
        plan.sync([(id: 4, width: 640, fps: 10), (id: 9, width: 640, fps: 10), (id: 5, width: 1280, fps: 10)])
        let g = plan.frame(capturedAt: 1_000 * ms, camera: PreviewCamera(width: 800, height: 450, fps: Rational(30)))
        XCTAssertEqual(g.map(\.width), [640, 800])
        XCTAssertEqual(g.map(\.ids), [[4, 9], [5]])
    }

    func testAGapLosesOnlyItsSlotsAndNextUsefulSkipsWhatNobodyTakes() {
        var plan = PreviewPlan()
        plan.sync([(id: 1, width: 640, fps: 10)])
        XCTAssertNil(plan.nextUseful, "a new subscriber takes the next frame")
        XCTAssertEqual(plan.frame(capturedAt: 1_000 * ms, camera: hd).count, 1)
        XCTAssertEqual(plan.nextUseful, 1_083_333_334, "half a camera frame (16.67 ms) before the next grid point")
        XCTAssertTrue(plan.frame(capturedAt: 1_067 * ms, camera: hd).isEmpty)
        XCTAssertEqual(plan.frame(capturedAt: 1_095 * ms, camera: hd).count, 1, "a frame 5 ms early is the grid point's")
        // No frame for 2 s (the camera stalled): the next one is taken at once, on a new grid.
        XCTAssertEqual(plan.frame(capturedAt: 3_080 * ms, camera: hd).count, 1)
        XCTAssertTrue(plan.frame(capturedAt: 3_113 * ms, camera: hd).isEmpty)
        XCTAssertTrue(plan.frame(capturedAt: 3_146 * ms, camera: hd).isEmpty)
        XCTAssertEqual(plan.frame(capturedAt: 3_180 * ms, camera: hd).count, 1)
    }

    func testSyncKeepsTheGridOfThoseWhoStayAndStartsNewOnesAtTheNextFrame() {
        var plan = PreviewPlan()
        plan.sync([(id: 1, width: 640, fps: 5)])
        _ = plan.frame(capturedAt: 0, camera: hd)
        plan.sync([(id: 1, width: 640, fps: 5), (id: 2, width: 640, fps: 5)])
        XCTAssertEqual(plan.frame(capturedAt: 33 * ms, camera: hd).first?.ids, [2])
        plan.sync([(id: 2, width: 640, fps: 5)])
        XCTAssertTrue(plan.frame(capturedAt: 66 * ms, camera: hd).isEmpty)
        plan.sync([])
        XCTAssertTrue(plan.isEmpty)
    }

    // MARK: Latest wins

    func testASlowReaderGetsTheNewestWithTheCountItMissed() {
        var slot = LatestSlot<String>()
        XCTAssertNil(slot.take())
        slot.offer("a")
        XCTAssertEqual(slot.take()?.item, "a")
        slot.offer("b"); slot.offer("c"); slot.offer("d")
        let t = slot.take()
        XCTAssertEqual(t?.item, "d"); XCTAssertEqual(t?.dropped, 2); XCTAssertEqual(t?.seq, 4)
        slot.offer("e")
        XCTAssertEqual(slot.take()?.dropped, 0)
        XCTAssertNil(slot.take())
    }

    func testLivenessIsReportedOncePerChange() {
        var l = PreviewLiveness()
        XCTAssertFalse(l.observe(live: true, reason: nil), "frames flowing from the start are no news")
        XCTAssertTrue(l.observe(live: false, reason: "no camera"))
        XCTAssertFalse(l.observe(live: false, reason: "no camera"))
        XCTAssertTrue(l.observe(live: false, reason: "the camera failed"))
        XCTAssertTrue(l.observe(live: true, reason: nil))
        XCTAssertFalse(l.observe(live: true, reason: "ignored when live"))
    }

    // MARK: Levels

    private func feed(_ w: inout LevelsWindow, _ samples: [Int16], time: Nanos) -> [(peak: [Double], rms: [Double], at: Nanos)] {
        var out: [(peak: [Double], rms: [Double], at: Nanos)] = []
        samples.withUnsafeBufferPointer { p in
            var from = 0
            while from < p.count / w.channels {
                let r = w.feed(p, from: from, time: time)
                from = r.next
                if r.closed { out.append((w.peakDbfs, w.rmsDbfs, w.capturedNs)) }
            }
        }
        return out
    }

    func testAWindowIs50msOfCapturedSamplesWhateverTheBlocks() {
        var w = LevelsWindow(sampleRate: 48_000, channels: 1)
        XCTAssertEqual(w.windowFrames, 2400)
        let t0: Nanos = 9_000 * ms
        var closed: [Nanos] = []
        for b in 0..<10 {  // 10 ms blocks: a window closes every fifth
            let r = feed(&w, [Int16](repeating: 0, count: 480), time: t0 + Int64(b) * 10 * ms)
            closed += r.map(\.at)
            if let last = r.last { XCTAssertEqual(last.peak, [-120.0]); XCTAssertEqual(last.rms, [-120.0], "digital silence") }
        }
        XCTAssertEqual(closed, [t0, t0 + 50 * ms], "each window's time is its first sample's capture instant")
        // One block of 120 ms closes two windows and leaves 20 ms in the third.
        let r = feed(&w, [Int16](repeating: 1, count: 5760), time: t0 + 100 * ms)
        XCTAssertEqual(r.map(\.at), [t0 + 100 * ms, t0 + 150 * ms])
    }

    func testPeakAndRmsPerChannelInDbfs() {
        var w = LevelsWindow(sampleRate: 48_000, channels: 2)
        // Left: the test source's beep (0.5 * sine at 1 kHz); right: a full-scale square.
        var s: [Int16] = []
        for j in 0..<2400 {
            s.append(Int16((0.5 * sin(2 * Double.pi * 1000 * Double(j) / 48_000) * 32767).rounded()))
            s.append(j % 2 == 0 ? -32768 : 32767)
        }
        let r = feed(&w, s, time: 0)
        XCTAssertEqual(r.count, 1)
        XCTAssertEqual(r[0].peak, [-6.0, 0.0])
        XCTAssertEqual(r[0].rms[0], -9.0, accuracy: 0.05, "a sine's RMS is 3 dB under its peak")
        XCTAssertEqual(r[0].rms[1], 0.0, accuracy: 0.05)
        XCTAssertEqual(LevelsWindow.dbfs(amplitude: 0.0001), -120.0, "nothing reads under -120")
    }
}
