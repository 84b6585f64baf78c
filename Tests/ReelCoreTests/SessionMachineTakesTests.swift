import XCTest
import ReelTestSupport
@testable import ReelCore

/// Undo and the length cap through `SessionMachine`, on the manual clock: the frame slots roll
/// back with the output, the driver's muxer cuts back where the `Rollback` says, and the pts stay
/// one frame apart across every join.
final class SessionMachineTakesTests: XCTestCase {
    let ms: Nanos = 1_000_000
    let s: Nanos = 1_000_000_000
    let t0: Nanos = 1000 * 1_000_000_000
    typealias Run = ManualSession.Run

    private func frames(_ r: Range<Int64>, fps: Rational = Rational(30)) -> [Nanos] {
        let f = VideoFormat(width: 64, height: 36, fps: fps, pixelFormat: .i420)
        return r.map { t0 + f.frameTime($0) }
    }

    /// Take 1 to 1.01 s, take 2 from 2.001 s undone while recording at 2.5 s, take 3 from 3 s to the
    /// stop at 4 s; the camera runs 5 s, the microphone until `microphoneUntil`.
    private func takeTwoUndoneWhileRecording(microphoneUntil: Nanos) -> ManualSession {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 5 * s, latency: 15 * ms)
        m.microphone(from: t0, until: microphoneUntil, chunk: 480, latency: 25 * ms)
        m.request(.pause, at: t0 + 1010 * ms)
        m.request(.resume, at: t0 + 2001 * ms)
        m.undo(at: t0 + 2500 * ms)
        m.request(.resume, at: t0 + 3000 * ms)
        m.request(.stop, at: t0 + 4000 * ms)
        m.run(until: t0 + 10 * s)
        return m
    }

    func testUndoWhileRecordingRollsTheSlotsAndTheOutputBack() {
        let m = takeTwoUndoneWhileRecording(microphoneUntil: t0 + 5 * s)

        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.sinkErrors, [])
        // Take 2 (frames 61..., captured from 2.0333 s) is gone: frames 61..74 had been encoded
        // (arrived by 2.5 s) and are cut back; take 3 starts on slot 31, one frame after take 1.
        guard case let .success(rb)? = m.undoReplies.first else { return XCTFail("undo refused") }
        XCTAssertEqual(rb, SessionMachine.Rollback(take: 2, label: nil, videoPTS: 31 * 3000, framesRemoved: 14, audioSamples: 49_600,
                                                   samplesRemoved: rb.samplesRemoved, outputStart: 1_033_333_333))
        XCTAssertEqual(m.videoCaptured, frames(0..<31) + frames(90..<120))
        XCTAssertEqual(m.videoPTS, (0..<61).map { Int64($0) * 3000 })
        XCTAssertEqual(m.audio, [Run(from: 0, count: 49_600), Run(from: 144_000, count: 48_000)])
        XCTAssertEqual(m.finalProgress?.frames, 61)
        XCTAssertEqual(m.finalProgress?.takes.map(\.number), [1, 2])
        XCTAssertEqual(m.finalProgress?.segmentDurations.count, 2)
    }

    /// A microphone that stops delivering (no error) before take 2 begins: take 2 keeps frames but
    /// never any audio. Undoing it still goes back to take 1's end on both tracks; the recording
    /// goes on and ends complete, the audio completed with silence to the video's length.
    func testUndoOfATakeTheMicrophoneNeverReached() {
        let m = takeTwoUndoneWhileRecording(microphoneUntil: t0 + 1500 * ms)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.sinkErrors, [])
        guard case let .success(rb)? = m.undoReplies.first else { return XCTFail("undo refused: \(m.undoReplies)") }
        XCTAssertEqual(rb.take, 2)
        XCTAssertEqual(rb.videoPTS, 31 * 3000)
        XCTAssertEqual(rb.audioSamples, 49_600, "take 1's audio ends where its video does")
        XCTAssertEqual(m.videoPTS, (0..<61).map { Int64($0) * 3000 })
        XCTAssertEqual(m.finalProgress?.takes.map(\.number), [1, 2])
        // Take 1's samples, then take 3's length of silence (the microphone is gone).
        XCTAssertEqual(m.audio.first, Run(from: 0, count: 49_600))
        XCTAssertEqual(m.audio.reduce(0) { $0 + $1.count }, 61 * 1600, "audio as long as the 61 frames")
    }

    func testUndoingEveryTakeThenStoppingFinishesWithNothingKept() {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 3 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 3 * s, chunk: 480, latency: 25 * ms)
        m.undo(at: t0 + 1 * s)
        m.undo(at: t0 + 1100 * ms)
        m.request(.stop, at: t0 + 1500 * ms)
        m.run(until: t0 + 10 * s)
        XCTAssertEqual(m.ending, .nothingKept)
        XCTAssertEqual(m.videoPTS, [])
        XCTAssertEqual(m.audio, [])
        XCTAssertEqual(m.undoReplies.count, 2)
        if case let .failure(e) = m.undoReplies.last { XCTAssertEqual(e, .cannotUndo(phase: .paused)) } else { XCTFail("second undo accepted") }
        XCTAssertLessThan(m.end, t0 + 1600 * ms)
    }

    /// Every take undone, the file's time 0 is the next take's first frame: the origin moves there.
    func testTheOriginMovesToTheFirstKeptTakeAfterEveryTakeWasUndone() {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 3 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 3 * s, chunk: 480, latency: 25 * ms)
        m.undo(at: t0 + 1 * s)
        m.request(.resume, at: t0 + 1490 * ms)   // frame 45 (1.5 s) is the first after it
        m.request(.stop, at: t0 + 2 * s)
        m.run(until: t0 + 10 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.videoCaptured.first, frames(45..<46).first)
        XCTAssertEqual(m.videoPTS.first, 0)
        XCTAssertEqual(m.finalProgress?.origin, frames(45..<46).first)
    }

    func testTheLengthCapStopsTheRecordingAndSaysSo() {
        var m = ManualSession(start: t0, maxDuration: 1500 * ms)
        m.camera(from: t0, until: t0 + 5 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 5 * s, chunk: 480, latency: 25 * ms)
        m.request(.pause, at: t0 + 1000 * ms)
        m.request(.resume, at: t0 + 2000 * ms)
        m.request(.pause, at: t0 + 4000 * ms)
        m.run(until: t0 + 10 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.capReached, [1500 * ms])
        XCTAssertEqual(m.videoCaptured, frames(0..<30) + frames(60..<75))
        XCTAssertEqual(m.videoPTS, (0..<45).map { Int64($0) * 3000 })
        XCTAssertEqual(m.audio, [Run(from: 0, count: 48_000), Run(from: 96_000, count: 24_000)])
        XCTAssertEqual(m.finalProgress?.remaining, 0)
        XCTAssertEqual(m.finalProgress?.capReached, true)
        XCTAssertEqual(m.replies.count, 2, "ended at the cap, before the pause at 4 s")
        XCTAssertLessThan(m.end, t0 + 2600 * ms)
    }

    func testLabelsNameTheTakes() {
        var machine = SessionMachine(.init(videoFPS: Rational(30), audio: nil, paced: true), start: t0, label: "intro")
        for n: Int64 in 0..<15 { _ = machine.video(at: frames(n..<(n + 1))[0]) }
        _ = machine.request(.pause, at: t0 + 500 * ms)
        for n: Int64 in 15..<18 { XCTAssertEqual(machine.video(at: frames(n..<(n + 1))[0]), .drop) }
        _ = machine.request(.resume, at: t0 + 600 * ms, label: "demo")
        for n: Int64 in 18..<28 { _ = machine.video(at: frames(n..<(n + 1))[0]) }
        XCTAssertEqual(machine.progress.takes.map(\.title), ["intro", "demo"])
        guard case let .success(rb) = machine.undo(at: t0 + 1400 * ms) else { return XCTFail("undo refused") }
        XCTAssertEqual(rb.label, "demo")
        XCTAssertEqual(rb.videoPTS, 15 * 3000, "take 2 began on slot 15")
        XCTAssertEqual(rb.framesRemoved, 10)
        XCTAssertEqual(machine.progress.takes.map(\.title), ["intro"])
        XCTAssertEqual(machine.progress.frames, 15)
        // The next take's first frame takes slot 15 again.
        _ = machine.request(.resume, at: t0 + 1500 * ms)
        // ...and begins the take again, under the removed take's number (a new marker, a new chapter).
        guard case let .encode(pts, newTake) = machine.video(at: frames(45..<46)[0]) else { return XCTFail("not encoded") }
        XCTAssertEqual(pts, 15 * 3000)
        XCTAssertEqual(newTake?.number, 2)
    }

    // MARK: Property test

    /// Random schedules of pauses, resumes, undos and a stop, and sometimes a cap, through the
    /// whole machine: the kept frames, their pts (one slot apart at every join) and the audio
    /// equal an oracle's computed from the frame grid and the schedule alone.
    func testRandomSessionsWithUndoAndCapMatchTheOracle() {
        var seeds = SplitMix64(seed: 0x7A4E_5E55)
        let fpsChoices = [Rational(15), Rational(25), Rational(30), Rational(30000, 1001)]
        let rateChoices = [32000, 44100, 48000]
        var undos = 0, caps = 0
        let trials = 300
        for trial in 0..<trials {
            let seed = seeds.next()
            var rng = SplitMix64(seed: seed)
            let fps = fpsChoices.randomElement(using: &rng)!
            let rate = rateChoices.randomElement(using: &rng)!
            let vf = VideoFormat(width: 64, height: 36, fps: fps, pixelFormat: .i420)
            let af = AudioFormat(sampleRate: rate, channels: 1)
            let vLatency = Nanos.random(in: 0...300 * ms, using: &rng)
            let aLatency = Nanos.random(in: 0...300 * ms, using: &rng)
            let chunk = Int.random(in: 32...(rate / 50), using: &rng)
            let cap: Nanos? = Bool.random(using: &rng) ? Nanos.random(in: 100 * ms...4 * s, using: &rng) : nil
            enum Op { case pause, resume, undo, stop }
            var ops: [(Nanos, Op)] = []
            var t = t0, recording = true, lastUndo: Nanos = 0
            for _ in 0..<Int.random(in: 0...8, using: &rng) {
                t += Nanos.random(in: 50 * ms...1200 * ms, using: &rng)
                var op: Op = recording ? (Int.random(in: 0..<3, using: &rng) == 0 ? .undo : .pause)
                                       : (Int.random(in: 0..<3, using: &rng) == 0 ? .undo : .resume)
                if op == .undo, cap != nil, t < lastUndo + vLatency + 120 * ms { op = recording ? .pause : .resume }  // see Timeline.undo
                if op == .undo { lastUndo = t }
                ops.append((t, op))
                recording = op == .resume
            }
            t += Nanos.random(in: 50 * ms...1200 * ms, using: &rng); ops.append((t, .stop))
            let stopAt = t
            let label = "trial \(trial) seed \(seed): \(fps) fps, \(rate) Hz, chunk \(chunk), latency \(vLatency)/\(aLatency), cap \(cap.map(String.init) ?? "none"), ops \(ops.map { "\($0.1)@\(($0.0 - t0) / ms)" })"

            var m = ManualSession(fps: fps, audio: af, start: t0, maxDuration: cap)
            m.camera(from: t0, until: stopAt + 2 * s, latency: vLatency)
            m.microphone(from: t0, until: stopAt + 2 * s, chunk: chunk, latency: aLatency)
            for (rt, op) in ops {
                switch op {
                case .pause: m.request(.pause, at: rt)
                case .resume: m.request(.resume, at: rt)
                case .stop: m.request(.stop, at: rt)
                case .undo: m.undo(at: rt)
                }
            }
            m.run(until: stopAt + 20 * s)

            // Oracle, in frame numbers and source samples (both streams start at t0).
            func firstFrame(atOrAfter x: Nanos) -> Int64 {
                var n = max(0, rescale(x - t0, fps.num, nanosPerSecond * fps.den, rounding: .down) - 1)
                while t0 + vf.frameTime(n) < x { n += 1 }
                return n
            }
            let sample = { (n: Int64) in af.sampleIndex(at: vf.frameTime(n)) }
            let capSamples = cap.map { af.sampleIndex(at: $0) }
            var kept: [(b: Int64, e: Int64, eS: Int64)] = []
            var running: (b: Int64, x: Nanos?, capEnd: Int64)?
            var stopped = false
            func begin(_ b: Int64) {
                let k = kept.reduce(Int64(0)) { $0 + $1.eS - sample($1.b) }
                let offNanos = rescale(sample(b) - k, nanosPerSecond, Int64(rate))
                guard let capSamples else { running = (b, nil, 0); return }
                let capEnd = max(sample(b), sample(b) + capSamples - k)
                running = (b, capEnd == sample(b) ? t0 + vf.frameTime(b) : max(t0 + vf.frameTime(b), t0 + offNanos + cap!), capEnd)
            }
            func end(_ e: Int64, onGrid: Bool = true) {
                let r = running!
                if let x = r.x, t0 + vf.frameTime(e) >= x || sample(e) >= r.capEnd { kept.append((r.b, e, r.capEnd)) }
                else if onGrid, e > r.b {
                    // A take ends its audio where its video ends: after its last frame's slot.
                    let frames = kept.reduce(e - r.b) { $0 + $1.e - $1.b }
                    let before = kept.reduce(Int64(0)) { $0 + $1.eS - sample($1.b) }
                    let eS = sample(r.b) + af.sampleIndex(at: vf.frameTime(frames)) - before
                    kept.append((r.b, e, r.x == nil ? eS : min(eS, r.capEnd)))
                } else { kept.append((r.b, e, sample(e))) }
                running = nil
            }
            begin(0)
            for (i, (rt, op)) in ops.enumerated() where !stopped {
                if let r = running, let x = r.x, rt >= x { end(firstFrame(atOrAfter: x)); stopped = true; break }
                switch op {
                case .pause:
                    // A pause whose resume comes on the same frame ends nothing: the take goes on.
                    let e = firstFrame(atOrAfter: rt)
                    let resumedThere = i + 1 < ops.count && ops[i + 1].1 == .resume && firstFrame(atOrAfter: ops[i + 1].0) == e
                    end(e, onGrid: !resumedThere)
                case .resume: begin(firstFrame(atOrAfter: rt))
                case .undo: if running != nil { running = nil } else { _ = kept.popLast() }
                case .stop: if running != nil { end(firstFrame(atOrAfter: rt)) }; stopped = true
                }
            }
            let expectedFrames = kept.flatMap { frames($0.b..<$0.e, fps: fps) }
            var expectedAudio: [Run] = []
            for k in kept where k.eS > sample(k.b) {
                if let l = expectedAudio.last, l.from! + l.count == sample(k.b) { expectedAudio[expectedAudio.count - 1].count += k.eS - sample(k.b) }
                else { expectedAudio.append(Run(from: sample(k.b), count: k.eS - sample(k.b))) }
            }
            let tick = 90_000 * fps.den / fps.num

            XCTAssertEqual(m.ending, kept.isEmpty ? .nothingKept : .complete, label)
            XCTAssertEqual(m.sinkErrors, [], label)
            XCTAssertEqual(m.videoCaptured, expectedFrames, "kept frames: \(label)")
            XCTAssertEqual(m.videoPTS, (0..<Int64(expectedFrames.count)).map { $0 * tick }, "pts: \(label)")
            XCTAssertEqual(m.audio, expectedAudio, "audio: \(label)")
            if let capSamples { XCTAssertLessThanOrEqual(m.audioTotal, capSamples, label) }
            undos += m.undoReplies.filter { if case .success = $0 { return true }; return false }.count
            caps += m.capReached.isEmpty ? 0 : 1
        }
        XCTAssertGreaterThan(undos, trials / 2)
        XCTAssertGreaterThan(caps, trials / 10)
        print("session takes property: \(trials) sessions, \(undos) undos, \(caps) stopped by the cap")
    }
}
