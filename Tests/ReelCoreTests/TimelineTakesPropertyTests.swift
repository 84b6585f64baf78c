import XCTest
import ReelTestSupport
@testable import ReelCore

/// Property tests for takes: random schedules of pauses, resumes, undos (some refused), stops and
/// a random length cap, both streams arriving independently, checked against an oracle that
/// computes from the schedule and the frame grid alone which capture spans are kept and the
/// output timestamps they get. The driver plays the muxer: an undo cuts its output back exactly
/// where the decision says.
final class TimelineTakesPropertyTests: XCTestCase {
    enum Op: Equatable { case pause, resume, stop, undo }

    struct Scenario {
        var fps: Rational
        var rate: Int
        var steps: Int
        var maxSpan: Nanos
        var videoLatency: Nanos
        var audioLatency: Nanos
        var audioLead: Nanos
        var cap: Nanos?
    }

    /// A kept take in the oracle: capture span [b, e) on the frame grid, absolute samples [bS, eS).
    struct OTake { var b: Nanos; var e: Nanos?; var bS: Int64; var eS: Int64?; var offNanos: Nanos; var capped = false }

    func testRandomTakeSchedulesMatchTheOracle() {
        var seeds = SplitMix64(seed: 0x7A4E5)
        let fpsChoices = [Rational(15), Rational(25), Rational(30), Rational(30000, 1001), Rational(60)]
        let rateChoices = [8000, 22050, 44100, 48000, 96000]
        var capsHit = 0, undos = 0, refusedUndos = 0, empty = 0
        let only = ProcessInfo.processInfo.environment["REEL_TAKES_SEED"].flatMap { UInt64($0) }
        let schedules = 4000
        for trial in 0..<schedules {
            let seed = seeds.next()
            if let only, only != seed { continue }
            var rng = SplitMix64(seed: seed)
            let maxSpan = Nanos.random(in: 1_000_000...300_000_000, using: &rng)
            let steps = Int.random(in: 1...16, using: &rng)
            let sc = Scenario(
                fps: fpsChoices.randomElement(using: &rng)!, rate: rateChoices.randomElement(using: &rng)!,
                steps: steps, maxSpan: maxSpan,
                videoLatency: Nanos.random(in: 0...200_000_000, using: &rng),
                audioLatency: Nanos.random(in: 0...200_000_000, using: &rng),
                audioLead: Nanos.random(in: -40_000_000...40_000_000, using: &rng),
                cap: Bool.random(using: &rng) ? Nanos.random(in: 1...(maxSpan * Nanos(steps) / 2 + 1), using: &rng) : nil)
            let r = check(sc, seed: seed, label: "trial \(trial) seed \(seed) \(sc)")
            capsHit += r.capHit ? 1 : 0; undos += r.undos; refusedUndos += r.refused; empty += r.empty ? 1 : 0
        }
        // The generator reaches every case it is meant to.
        if only != nil { return }
        XCTAssertGreaterThan(capsHit, schedules / 10)
        XCTAssertGreaterThan(undos, schedules)
        XCTAssertGreaterThan(refusedUndos, schedules / 20)
        XCTAssertGreaterThan(empty, schedules / 100)
        print("takes property: \(schedules) schedules, \(undos) undos, \(refusedUndos) refused, \(capsHit) caps hit, \(empty) with nothing kept")
    }

    @discardableResult
    private func check(_ sc: Scenario, seed: UInt64, label: String) -> (capHit: Bool, undos: Int, refused: Int, empty: Bool) {
        var rng = SplitMix64(seed: seed ^ 0xABCDEF)
        let vf = VideoFormat(width: 64, height: 36, fps: sc.fps, pixelFormat: .yuyv)
        let af = AudioFormat(sampleRate: sc.rate, channels: 1)
        let t0: Nanos = 3_600 * nanosPerSecond + Nanos.random(in: 0...1_000_000_000, using: &rng)
        let startReq = t0 + Nanos.random(in: 0...50_000_000, using: &rng)
        let anchor = t0 + sc.audioLead

        // The schedule: valid moves mostly, and undos with no take left (refused).
        var requests: [(t: Nanos, op: Op)] = []
        var t = startReq
        var recording = true, takes = 1
        for _ in 0..<sc.steps {
            t += Nanos.random(in: 0...sc.maxSpan, using: &rng)
            let x = Int.random(in: 0..<10, using: &rng)
            // With a cap, an undo soon after a resume may wait for the resume's frame (see
            // `Timeline.undo`): a second undo is then refused. Leave it time to settle.
            let undoing = recording ? x >= 6 : !(x < 6 || (takes == 0 && x < 8))
            if sc.cap != nil, undoing, let last = requests.last(where: { $0.op == .undo }) {
                t = max(t, last.t + sc.videoLatency + vf.frameTime(1) + 6_000_000)
            }
            if recording {
                if x < 6 { requests.append((t, .pause)); recording = false } else { requests.append((t, .undo)); recording = false; takes -= 1 }
            } else if x < 6 || (takes == 0 && x < 8) {
                requests.append((t, .resume)); recording = true; takes += 1
            } else {
                requests.append((t, .undo)); takes = max(0, takes - 1)
            }
        }
        t += Nanos.random(in: 0...sc.maxSpan, using: &rng); requests.append((t, .stop))
        let endOfMedia = t + 2 * nanosPerSecond

        // --- Oracle: from the schedule and the frame grid alone. ---
        func frameAt(_ n: Int64) -> Nanos { t0 + vf.frameTime(n) }
        func firstFrame(atOrAfter x: Nanos) -> Int64 {
            var n = max(0, rescale(x - t0, sc.fps.num, nanosPerSecond * sc.fps.den, rounding: .down) - 1)
            while frameAt(n) < x { n += 1 }
            return n
        }
        func cut(_ x: Nanos) -> Nanos { frameAt(firstFrame(atOrAfter: x)) }
        // The origin: the start's cut, for good.
        let s = cut(startReq)
        let aS = af.sampleIndex(at: s - anchor)
        func cutSample(_ c: Nanos) -> Int64 { aS + af.sampleIndex(at: c - s) }
        let capSamples = sc.cap.map { af.sampleIndex(at: $0) }
        var kept: [OTake] = []
        var running: OTake?
        var stopped = false
        var removed: [(Nanos, Nanos)] = []          // capture spans of undone takes (kept frames there: a bug)
        var expectRefused: [Bool] = []                // per request: refused (nil-equivalent after the cap: not checked)
        var checkedRequests = 0
        func begin(_ c: Nanos) -> OTake {
            let k = kept.reduce(Int64(0)) { $0 + $1.eS! - $1.bS }
            let offS = (cutSample(c) - aS) - k
            let offNanos = rescale(offS, nanosPerSecond, Int64(sc.rate))
            return OTake(b: c, e: nil, bS: cutSample(c), eS: nil, offNanos: offNanos)
        }
        func capEndSample(_ tk: OTake) -> Int64 { max(tk.bS, tk.bS + capSamples! - kept.reduce(Int64(0)) { $0 + $1.eS! - $1.bS }) }
        /// Where the take reaches the cap; at once when no time is left.
        func capAt(_ tk: OTake) -> Nanos? {
            guard let cap = sc.cap else { return nil }
            return capEndSample(tk) == tk.bS ? tk.b : max(tk.b, s + tk.offNanos + cap)
        }
        /// Ends the running take at cut `c`, or at the cap if `c` reaches it (a pause asked before
        /// the cap whose frame lands past it: paused with no time left).
        func end(_ c: Nanos) {
            var tk = running!
            if let x = capAt(tk), c >= x || cutSample(c) >= capEndSample(tk) {
                tk.e = c; tk.eS = capEndSample(tk); tk.capped = true
            } else { tk.e = c; tk.eS = cutSample(c) }
            kept.append(tk); running = nil
        }
        running = begin(s)
        for (rt, op) in requests {
            if stopped { break }
            if let tk = running, let x = capAt(tk), rt >= x { end(cut(x)); stopped = true; break }  // the cap comes first
            checkedRequests += 1
            switch op {
            case .pause: end(cut(rt)); expectRefused.append(false)
            case .stop:
                if running != nil { end(cut(rt)) }
                stopped = true; expectRefused.append(false)
            case .resume: running = begin(cut(rt)); expectRefused.append(false)
            case .undo:
                if let tk = running { removed.append((tk.b, rt)); running = nil; expectRefused.append(false) }
                else if let tk = kept.popLast() { removed.append((tk.b, tk.e!)); expectRefused.append(false) }
                else { expectRefused.append(true) }
            }
        }
        XCTAssertNil(running, label)
        let debug = ProcessInfo.processInfo.environment["REEL_TAKES_SEED"] != nil
        if debug {
            print("S \(s - t0) aS \(aS) requests:", requests.map { "\($0.op)@\($0.t - t0)" })
            print("oracle kept:", kept.map { "[\($0.b - t0), \($0.e! - t0)) samples [\($0.bS), \($0.eS!)) off \($0.offNanos) capped \($0.capped)" })
            print("removed:", removed.map { "[\($0.0 - t0), \($0.1 - t0))" })
        }
        let capHit = stopped && kept.last?.capped == true
        let expectedAudio = kept.reduce(Int64(0)) { $0 + $1.eS! - $1.bS }
        var expectedFrames: [(n: Int64, out: Nanos)] = []
        for tk in kept {
            var n = firstFrame(atOrAfter: tk.b)
            while frameAt(n) < tk.e! { expectedFrames.append((n, frameAt(n) - s - tk.offNanos)); n += 1 }
        }
        var expectedRuns: [(from: Int64?, count: Int64)] = []
        func push(_ from: Int64?, _ count: Int64, into runs: inout [(from: Int64?, count: Int64)]) {
            guard count > 0 else { return }
            if let l = runs.last, (l.from == nil && from == nil) || (l.from != nil && from != nil && l.from! + l.count == from!) {
                runs[runs.count - 1].count += count
            } else { runs.append((from, count)) }
        }
        for tk in kept {
            if tk.bS < 0 { push(nil, min(tk.eS!, 0) - tk.bS, into: &expectedRuns) }
            push(max(tk.bS, 0), tk.eS! - max(tk.bS, 0), into: &expectedRuns)
        }

        // --- Drive the timeline; the driver plays the muxer. ---
        var tl = Timeline(start: startReq, hasVideo: true, audio: af, maxDuration: sc.cap)
        var n: Int64 = 0, m: Int64 = 0
        var vArrive: Nanos = 0, aArrive: Nanos = 0
        var reqIdx = 0
        var frames: [(n: Int64, out: Nanos)] = []
        var fifoHead: Int64 = 0
        var out: [(from: Int64?, count: Int64)] = []
        var outCount: Int64 = 0
        var undos = 0, refused = 0
        func nextVideoArrival() -> Nanos { max(vArrive, frameAt(n) + sc.videoLatency + Nanos.random(in: 0...5_000_000, using: &rng)) }
        func nextChunk() -> Int64 { Int64.random(in: 1...Int64(max(2, sc.rate / 25)), using: &rng) }
        var pendingV = nextVideoArrival()
        var chunkLen = nextChunk()
        var pendingA = max(aArrive, anchor + af.sampleTime(m + chunkLen) + sc.audioLatency)
        while true {
            let nextReq = reqIdx < requests.count ? requests[reqIdx].t : Nanos.max
            let now = min(pendingV, pendingA, nextReq)
            if now > endOfMedia + sc.videoLatency + sc.audioLatency + nanosPerSecond { break }
            tl.advance(to: now)
            if now == nextReq {
                let (rt, op) = requests[reqIdx]
                var wasRefused = false
                if op == .undo {
                    do {
                        let u = try tl.undo(at: rt)
                        undos += 1
                        // The muxer cuts back: frames at or after the first kept one of the take, audio to the count.
                        let before = frames.count
                        if let from = u.videoOutputFrom { frames.removeAll { $0.out >= from } }
                        XCTAssertEqual(before - frames.count, u.framesRemoved, "frames removed: \(label)")
                        if u.videoOutputFrom == nil { XCTAssertEqual(u.framesRemoved, 0, label) }
                        XCTAssertEqual(outCount - u.audioOutput, u.samplesRemoved, label)
                        XCTAssertLessThanOrEqual(u.audioOutput, outCount, label)
                        var left = u.audioOutput
                        var cutRuns: [(from: Int64?, count: Int64)] = []
                        for r in out where left > 0 { cutRuns.append((r.from, min(r.count, left))); left -= min(r.count, left) }
                        out = cutRuns; outCount = u.audioOutput
                        XCTAssertEqual(tl.audioOutput, outCount, label)
                        XCTAssertEqual(tl.phase, .paused, label)
                    } catch { wasRefused = true; refused += 1 }
                } else {
                    do { try tl.request(op == .pause ? .pause : op == .resume ? .resume : .stop, at: rt) } catch { wasRefused = true }
                }
                if reqIdx < checkedRequests { XCTAssertEqual(wasRefused, expectRefused[reqIdx], "request \(reqIdx) \(op) refused: \(label)") }
                reqIdx += 1
            } else if now == pendingV {
                if case let .keep(o) = tl.video(at: frameAt(n)) { frames.append((n, o)) }
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
                    push(fifoHead, Int64(k), into: &out); fifoHead += Int64(k); outCount += Int64(k)
                case let .drop(d): fifoHead += Int64(d)
                case let .silence(z): push(nil, Int64(z), into: &out); outCount += Int64(z)
                }
            }
            if tl.isFinished { break }
        }
        XCTAssertTrue(tl.isFinished, "not finished: \(label)")
        if debug {
            print("frames:", frames.map { "\($0.n):\($0.out)" }, "expected:", expectedFrames.map { "\($0.n):\($0.out)" })
            print("takes:", tl.takes, "cuts:", tl.cuts.map { "\($0.keepAfter ? "K" : "D")\($0.isStop ? "s" : "")@\(($0.at ?? -1) - t0) rel \($0.rel) offS \($0.offsetSamples) offN \($0.offsetNanos)" })
            print("audio:", out, "expected:", expectedRuns)
        }

        // Kept frames and their output times are the oracle's, exactly; nothing of an undone take.
        XCTAssertEqual(frames.map(\.n), expectedFrames.map(\.n), "kept frames: \(label)")
        XCTAssertTrue(zip(frames, expectedFrames).allSatisfy { $0.out == $1.out }, "output times: \(label)")
        for f in frames where removed.contains(where: { frameAt(f.n) >= $0.0 && frameAt(f.n) < $0.1 }) {
            if !kept.contains(where: { frameAt(f.n) >= $0.b && frameAt(f.n) < $0.e! }) { XCTFail("frame \(f.n) of an undone take kept: \(label)"); break }
        }
        // Audio: exactly the oracle's samples, in order, silence only before the source's first sample.
        XCTAssertEqual(outCount, expectedAudio, "audio length: \(label)")
        XCTAssertEqual(tl.audioOutput, outCount, label)
        XCTAssertEqual(out.count, expectedRuns.count, "audio runs: \(label)")
        XCTAssertTrue(zip(out, expectedRuns).allSatisfy { $0.from == $1.from && $0.count == $1.count }, "audio runs differ: \(label)")
        XCTAssertEqual(tl.videoOutputFixes, 0, label)
        // The cap: never exceeded; hit exactly (to the frame, to the sample).
        if let cap = sc.cap {
            XCTAssertLessThanOrEqual(outCount, capSamples!, label)
            XCTAssertTrue(frames.allSatisfy { $0.out < cap }, "a frame at or past the cap: \(label)")
            XCTAssertEqual(tl.capReached, capHit, "cap reached: \(label)")
            if capHit { XCTAssertEqual(outCount, capSamples!, "cap in samples: \(label)") }
            if capHit, let last = frames.last { XCTAssertGreaterThanOrEqual(last.out + vf.frameTime(1) + af.sampleTime(1) + 1, cap, "video stops short of the cap: \(label)") }
        }
        // Takes: one per kept take, numbered 1..., contiguous in the output.
        let listed = tl.takes
        XCTAssertEqual(listed.map(\.number), Array(1...max(1, kept.count)).prefix(kept.count).map { $0 }, label)
        XCTAssertEqual(listed.map(\.outputStart), kept.map { $0.b - s - $0.offNanos }, label)
        XCTAssertLessThanOrEqual(abs(listed.first?.outputStart ?? 0), af.sampleTime(1) / 2 + 1, "the output starts at 0: \(label)")
        XCTAssertEqual(tl.keepsNothing, kept.isEmpty, label)
        // Sync and steps: each frame within a sample of the audio captured with it; video steps by
        // one frame at every join (resume or undo).
        let oneSample = af.sampleTime(1) + 2
        var seg = 0, outBefore: Int64 = 0
        for (i, f) in frames.enumerated() where frames.map(\.n) == expectedFrames.map(\.n) {
            while frameAt(f.n) >= kept[seg].e! { outBefore += kept[seg].eS! - kept[seg].bS; seg += 1 }
            let audioOut = outBefore + (cutSample(frameAt(f.n)) - kept[seg].bS)
            if abs(f.out - af.sampleTime(audioOut)) > oneSample { XCTFail("frame \(f.n) out \(f.out) vs audio \(af.sampleTime(audioOut)): \(label)"); break }
            if i > 0 {
                let step = f.out - frames[i - 1].out
                if step <= 0 || abs(step - (frameAt(f.n) - frameAt(f.n - 1))) > oneSample { XCTFail("video step \(step) at frame \(f.n): \(label)"); break }
            }
        }
        return (capHit, undos, refused, kept.isEmpty)
    }
}
