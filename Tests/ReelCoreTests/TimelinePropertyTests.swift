import XCTest
import ReelTestSupport
@testable import ReelCore

/// Property tests: random rates, schedules, chunk sizes and arrival orders, checked against an
/// oracle that computes the cuts straight from the frame grid, independently of `Timeline`.
final class TimelinePropertyTests: XCTestCase {
    struct Scenario {
        var fps: Rational
        var rate: Int
        var cycles: Int
        var maxSpan: Nanos        // record and pause spans are uniform in [0, maxSpan]
        var videoLatency: Nanos   // arrival = capture + base + jitter, per stream
        var audioLatency: Nanos
        var audioLead: Nanos      // audio's first sample relative to video's first frame (+ = later)
    }

    func testRandomSchedulesMatchTheOracle() {
        var seeds = SplitMix64(seed: 0x5EED)
        let fpsChoices = [Rational(15), Rational(25), Rational(30), Rational(30000, 1001), Rational(60)]
        let rateChoices = [8000, 22050, 44100, 48000, 96000]
        for trial in 0..<40 {
            let seed = seeds.next()
            var rng = SplitMix64(seed: seed)
            let sc = Scenario(
                fps: fpsChoices.randomElement(using: &rng)!, rate: rateChoices.randomElement(using: &rng)!,
                cycles: Int.random(in: 1...200, using: &rng),
                maxSpan: Nanos.random(in: 1_000_000...400_000_000, using: &rng),
                videoLatency: Nanos.random(in: 0...300_000_000, using: &rng),
                audioLatency: Nanos.random(in: 0...300_000_000, using: &rng),
                audioLead: Nanos.random(in: -40_000_000...40_000_000, using: &rng))
            check(sc, seed: seed, label: "trial \(trial) seed \(seed) \(sc)")
        }
    }

    func testTenThousandCyclesAccumulateNoError() {
        let sc = Scenario(fps: Rational(30000, 1001), rate: 44100, cycles: 10_000, maxSpan: 120_000_000,
                          videoLatency: 20_000_000, audioLatency: 45_000_000, audioLead: 7_000_000)
        check(sc, seed: 42, label: "10k cycles")
    }

    private func check(_ sc: Scenario, seed: UInt64, label: String) {
        var rng = SplitMix64(seed: seed ^ 0xABCDEF)
        let vf = VideoFormat(width: 64, height: 36, fps: sc.fps, pixelFormat: .yuyv)
        let af = AudioFormat(sampleRate: sc.rate, channels: 1)
        
        let t0: Nanos = 3_600 * nanosPerSecond + Nanos.random(in: 0...1_000_000_000, using: &rng) // large clock values
        let startReq = t0 + Nanos.random(in: 0...50_000_000, using: &rng)
        let anchor = t0 + sc.audioLead

        // The schedule: alternating record/pause spans, then stop.
        var requests: [(Nanos, Timeline.Request)] = []
        var t = startReq
        for _ in 0..<sc.cycles {
            t += Nanos.random(in: 0...sc.maxSpan, using: &rng); requests.append((t, .pause))
            t += Nanos.random(in: 0...sc.maxSpan, using: &rng); requests.append((t, .resume))
        }
        t += Nanos.random(in: 0...sc.maxSpan, using: &rng); requests.append((t, .stop))
        let endOfMedia = t + 2 * nanosPerSecond

        // --- Oracle: cut instants on the frame grid, cut samples, segments. ---
        func frameAt(_ n: Int64) -> Nanos { t0 + vf.frameTime(n) }
        func firstFrame(atOrAfter x: Nanos) -> Int64 {
            var n = max(0, rescale(x - t0, sc.fps.num, nanosPerSecond * sc.fps.den, rounding: .down) - 1)
            while frameAt(n) < x { n += 1 }
            return n
        }
        let s = frameAt(firstFrame(atOrAfter: startReq))
        let aS = af.sampleIndex(at: s - anchor)
        func cutSample(_ c: Nanos) -> Int64 { aS + af.sampleIndex(at: c - s) }
        var bounds: [(b: Nanos, e: Nanos)] = []
        var open = s
        for (rt, kind) in requests {
            let c = frameAt(firstFrame(atOrAfter: rt))
            switch kind { case .pause, .stop: bounds.append((open, c)); case .resume: open = c }
        }
        let sampleBounds = bounds.map { (cutSample($0.b), cutSample($0.e)) }
        let expectedAudio = sampleBounds.reduce(Int64(0)) { $0 + ($1.1 - $1.0) }

        // --- Drive the timeline with both streams arriving independently. ---
        var tl = Timeline(start: startReq, hasVideo: true, audio: af)
        var n: Int64 = 0, m: Int64 = 0
        var vArrive: Nanos = 0, aArrive: Nanos = 0
        var reqIdx = 0
        var keptFrames: [(n: Int64, out: Nanos)] = []
        var fifoHead: Int64 = 0                 // absolute index of the next pending sample
        var keptRuns: [(from: Int64, to: Int64, out: Int64)] = []
        var silence: Int64 = 0
        var outCount: Int64 = 0
        func nextVideoArrival() -> Nanos { max(vArrive, frameAt(n) + sc.videoLatency + Nanos.random(in: 0...5_000_000, using: &rng)) }
        func nextChunk() -> Int64 { Int64.random(in: 1...Int64(max(2, sc.rate / 25)), using: &rng) }
        var pendingV = nextVideoArrival()
        var chunkLen = nextChunk()
        var pendingA = max(aArrive, anchor + af.sampleTime(m + chunkLen) + sc.audioLatency)
        while true {
            let nextReq = reqIdx < requests.count ? requests[reqIdx].0 : Nanos.max
            let now = min(pendingV, pendingA, nextReq)
            if now > endOfMedia + sc.videoLatency + sc.audioLatency + nanosPerSecond { break }
            tl.advance(to: now)
            if now == nextReq {
                XCTAssertNoThrow(try tl.request(requests[reqIdx].1, at: now), label)
                reqIdx += 1
            } else if now == pendingV {
                if case let .keep(out) = tl.video(at: frameAt(n)) { keptFrames.append((n, out)) }
                n += 1; vArrive = now; pendingV = nextVideoArrival()
            } else {
                tl.audioArrived(count: Int(chunkLen), captureTime: anchor + af.sampleTime(m))
                m += chunkLen; aArrive = now
                chunkLen = nextChunk()
                pendingA = max(aArrive, anchor + af.sampleTime(m + chunkLen) + sc.audioLatency)
            }
            while let a = tl.nextAudioAction() {
                switch a {
                case let .keep(k):
                    XCTAssertLessThanOrEqual(fifoHead + Int64(k), m, "kept audio not yet delivered: \(label)")
                    if let last = keptRuns.last, last.to == fifoHead, last.out + (last.to - last.from) == outCount {
                        keptRuns[keptRuns.count - 1].to += Int64(k)
                    } else { keptRuns.append((fifoHead, fifoHead + Int64(k), outCount)) }
                    fifoHead += Int64(k); outCount += Int64(k)
                case let .drop(d): fifoHead += Int64(d)
                case let .silence(z): silence += Int64(z); outCount += Int64(z)
                }
            }
            if tl.isFinished { break }
        }
        XCTAssertTrue(tl.isFinished, "not finished: \(label)")

        // (a) Output audio length equals the recorded span in samples.
        XCTAssertEqual(outCount, expectedAudio, "audio length: \(label)")
        XCTAssertEqual(tl.audioOutput, outCount, label)
        // (b) Kept samples are exactly the segments' samples (silence only before the source's first sample).
        var expectedRuns: [(Int64, Int64)] = []
        var expectedSilence: Int64 = 0
        for (b, e) in sampleBounds where e > b {
            if b < 0 { expectedSilence += min(e, 0) - b }
            let lo = max(b, 0)
            if e > lo {
                if let last = expectedRuns.last, last.1 == lo { expectedRuns[expectedRuns.count - 1].1 = e }
                else { expectedRuns.append((lo, e)) }
            }
        }
        var merged: [(Int64, Int64)] = []
        for r in keptRuns { if let l = merged.last, l.1 == r.from { merged[merged.count - 1].1 = r.to } else { merged.append((r.from, r.to)) } }
        XCTAssertEqual(merged.count, expectedRuns.count, "kept run count: \(label)")
        XCTAssertTrue(zip(merged, expectedRuns).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }, "kept sample ranges differ: \(label)")
        XCTAssertEqual(silence, expectedSilence, "silence: \(label)")

        // (c) Exactly the frames inside a segment are kept; outputs strictly increase.
        var expectedFrames: [Int64] = []
        for (b, e) in bounds { var k = firstFrame(atOrAfter: b); while frameAt(k) < e { expectedFrames.append(k); k += 1 } }
        XCTAssertEqual(keptFrames.map(\.n), expectedFrames, "kept frames: \(label)")
        XCTAssertEqual(tl.videoOutputFixes, 0, label)

        // (d) Sync never drifts: each kept frame's output time equals the output time of the
        //     audio sample captured with it, within one sample, however many cycles came before.
        // (e) Video steps by one frame duration, within one sample, across every resume.
        let oneSample = af.sampleTime(1) + 2
        var seg = 0
        var outBefore: Int64 = 0
        let maxFrameStep = vf.frameTime(1) + 1
        for (i, f) in keptFrames.enumerated() {
            while frameAt(f.n) >= bounds[seg].e { outBefore += sampleBounds[seg].1 - sampleBounds[seg].0; seg += 1 }
            let mm = cutSample(frameAt(f.n))
            let audioOut = outBefore + (mm - sampleBounds[seg].0)
            let diff = f.out - af.sampleTime(audioOut)
            if abs(diff) > oneSample { XCTFail("frame \(f.n) out \(f.out) vs audio \(af.sampleTime(audioOut)) (\(diff) ns): \(label)"); break }
            if i > 0 {
                let step = f.out - keptFrames[i - 1].out
                if step <= 0 || abs(step - (frameAt(f.n) - frameAt(f.n - 1))) > oneSample || step > maxFrameStep + oneSample {
                    XCTFail("video step \(step) at frame \(f.n): \(label)"); break
                }
            }
        }
    }
}
