import XCTest
@testable import ReelCore

/// Takes, undo and the length cap, case by case (30 fps, 1000 Hz audio: one frame is 33.3 ms,
/// one sample 1 ms, so every count below can be checked by hand).
final class TimelineTakesTests: XCTestCase {
    let ms: Nanos = 1_000_000
    let vf = VideoFormat(width: 64, height: 36, fps: Rational(30), pixelFormat: .yuyv)
    let af = AudioFormat(sampleRate: 1000, channels: 1)

    enum Op { case pause, resume(String?), stop, undo, undoTake(Int) }

    /// What the muxer holds after a run: frames (index, output time), audio as source sample
    /// numbers (nil: silence), the undo decisions and refusals.
    struct Result {
        var frames: [(n: Int64, out: Nanos)] = []
        var audio: [Int64?] = []
        var undos: [Timeline.Undo] = []
        var errors: [Timeline.RequestError] = []
        var tl: Timeline
    }

    /// Frames on the grid and 10 ms audio chunks from 0, in capture order; video arrives
    /// `videoLatency` late (so cuts can still be pending at a request). A request at `t` is
    /// taken when the driver's clock reaches `t`.
    func run(_ ops: [(Nanos, Op)], until end: Nanos, cap: Nanos? = nil, videoLatency: Nanos = 0, audio: Bool = true,
             label: String? = nil) -> Result {
        var r = Result(tl: Timeline(start: 0, hasVideo: true, audio: audio ? af : nil, label: label, maxDuration: cap))
        var ops = ops[...]
        var n: Int64 = 0, m: Int64 = 0
        var fifo: Int64 = 0
        while true {
            let vArrive = vf.frameTime(n) + videoLatency, aArrive = audio ? af.sampleTime(m + 10) : Nanos.max
            let next = min(vArrive, aArrive, ops.first?.0 ?? .max)
            if next > end { break }
            r.tl.advance(to: next)
            if let (t, op) = ops.first, t == next {
                ops.removeFirst()
                do {
                    switch op {
                    case .pause: try r.tl.request(.pause, at: t)
                    case let .resume(label): try r.tl.request(.resume, at: t, label: label)
                    case .stop: try r.tl.request(.stop, at: t)
                    case .undo, .undoTake:
                        var expecting: Int?
                        if case let .undoTake(n) = op { expecting = n }
                        let u = try r.tl.undo(at: t, expecting: expecting)
                        r.undos.append(u)
                        if let from = u.videoOutputFrom { r.frames.removeAll { $0.out >= from } }
                        r.audio.removeLast(r.audio.count - Int(u.audioOutput))
                    }
                } catch { r.errors.append(error) }
            } else if next == vArrive {
                if case let .keep(out) = r.tl.video(at: vf.frameTime(n)) { r.frames.append((n, out)) }
                n += 1
            } else {
                r.tl.audioArrived(count: 10, captureTime: af.sampleTime(m))
                m += 10
            }
            while let a = r.tl.nextAudioAction() {
                switch a {
                case let .keep(k): r.audio += (fifo..<(fifo + Int64(k))).map { Optional($0) }; fifo += Int64(k)
                case let .drop(d): fifo += Int64(d)
                case let .silence(z): r.audio += Array(repeating: nil, count: z)
                }
            }
        }
        return r
    }

    func frames(_ r: Range<Int64>) -> [Int64] { Array(r) }
    func samples(_ r: Range<Int64>) -> [Int64?] { r.map { Optional($0) } }
    func outputs(_ count: Int) -> [Nanos] { (0..<count).map { vf.frameTime(Int64($0)) } }

    func testUndoWhilePausedRemovesTheLastTakeAndTheNextResumeContinuesRightAfterTheKeptOnes() {
        let r = run([(1000 * ms, .pause), (2000 * ms, .resume("B")), (3000 * ms, .pause), (3500 * ms, .undo),
                     (4000 * ms, .resume("C")), (5000 * ms, .stop)], until: 6000 * ms, label: "A")
        XCTAssertEqual(r.errors, [])
        XCTAssertEqual(r.undos, [Timeline.Undo(take: 2, label: "B", outputStart: 1000 * ms, videoOutputFrom: 1000 * ms,
                                               framesRemoved: 30, audioOutput: 1000, samplesRemoved: 1000)])
        XCTAssertEqual(r.frames.map(\.n), frames(0..<30) + frames(120..<150))
        XCTAssertEqual(r.frames.map(\.out), outputs(60), "one frame apart across the undo join")
        XCTAssertEqual(r.audio, samples(0..<1000) + samples(4000..<5000), "no gap, no overlap")
        XCTAssertEqual(r.tl.takes, [Timeline.Take(number: 1, label: "A", outputStart: 0, duration: 1000 * ms),
                                   Timeline.Take(number: 2, label: "C", outputStart: 1000 * ms, duration: 1000 * ms)])
        XCTAssertEqual(r.tl.takes.map(\.title), ["A", "C"])
        XCTAssertTrue(r.tl.isFinished)
    }

    /// `undo --take N`: refused, touching nothing, unless take N is the last; a retry of an undo
    /// that was applied is refused instead of removing the take before it.
    func testAnUndoExpectingAnotherTakeIsRefusedAndTouchesNothing() {
        let r = run([(1000 * ms, .pause), (2000 * ms, .resume("B")), (2500 * ms, .undoTake(1)), (3000 * ms, .undoTake(2)),
                     (3200 * ms, .undoTake(2)), (3500 * ms, .resume("C")), (4000 * ms, .stop)], until: 5000 * ms, label: "A")
        XCTAssertEqual(r.errors, [.wrongTake(expected: 1, last: 2), .wrongTake(expected: 2, last: 1)])
        XCTAssertEqual(r.undos.map(\.take), [2])
        // Take 2 ran to 3000 ms (the refused undo at 2500 ms did not end it), then went whole.
        XCTAssertEqual(r.frames.map(\.n), frames(0..<30) + frames(105..<120))
        XCTAssertEqual(r.tl.takes.map(\.title), ["A", "C"])
        XCTAssertEqual(Timeline.RequestError.wrongTake(expected: 2, last: 1).description.prefix(52),
                       "cannot undo take 2: the last take is take 1 (take 2 ")
    }

    func testUndoWhileRecordingEndsTheTakeThereRemovesItAndLeavesThePauseOpen() {
        // Take 1 is undone at 500 ms: the output starts again at the resume, time 0, sample 0.
        let r = run([(500 * ms, .undo), (1000 * ms, .resume(nil)), (2000 * ms, .stop)], until: 3000 * ms)
        XCTAssertEqual(r.undos.map(\.take), [1])
        XCTAssertEqual(r.undos.first?.outputStart, 0)
        XCTAssertEqual(r.undos.first?.audioOutput, 0)
        XCTAssertEqual(r.frames.map(\.n), frames(30..<60))
        XCTAssertEqual(r.frames.map(\.out), outputs(30))
        XCTAssertEqual(r.audio, samples(1000..<2000))
        XCTAssertEqual(r.tl.takes.map(\.number), [1])
        XCTAssertEqual(r.tl.takes.first?.title, "Take 1")
    }

    func testMediaOfTheRemovedTakeArrivingAfterTheUndoAreDropped() {
        // Video 200 ms late: frames up to 800 ms of take 2 arrive after the undo at 1000 ms and
        // are judged by capture time; the pause cut of take 2 was never resolved on the grid.
        let r = run([(300 * ms, .pause), (400 * ms, .resume(nil)), (1000 * ms, .undo), (1500 * ms, .resume(nil)),
                     (2000 * ms, .stop)], until: 3000 * ms, videoLatency: 200 * ms)
        XCTAssertEqual(r.errors, [])
        XCTAssertEqual(r.frames.map(\.n), frames(0..<9) + frames(45..<60))
        XCTAssertEqual(r.frames.map(\.out), outputs(24))
        XCTAssertEqual(r.audio, samples(0..<300) + samples(1500..<2000))
        XCTAssertEqual(r.undos.first?.framesRemoved, 12, "frames 12..23 had arrived (captured up to 766 ms)")
    }

    func testUndoWhileThePauseCutIsPendingRemovesTheTakeWhole() {
        // The pause at 1010 ms waits for frame 31; the undo at 1020 ms comes before it arrives.
        let r = run([(1010 * ms, .pause), (1020 * ms, .undo), (2000 * ms, .resume(nil)), (3000 * ms, .stop)],
                    until: 4000 * ms, videoLatency: 100 * ms)
        XCTAssertEqual(r.undos.first?.take, 1)
        XCTAssertEqual(r.frames.map(\.n), frames(60..<90))
        XCTAssertEqual(r.frames.map(\.out), outputs(30))
        XCTAssertEqual(r.audio, samples(2000..<3000))
    }

    func testRepeatedUndoRemovesEarlierTakesDownToNoneThenRefuses() {
        let r = run([(500 * ms, .pause), (600 * ms, .resume(nil)), (900 * ms, .undo), (950 * ms, .undo), (960 * ms, .undo),
                     (1000 * ms, .resume(nil)), (1100 * ms, .undo), (1200 * ms, .resume(nil)), (1500 * ms, .stop), (1600 * ms, .undo)],
                    until: 2000 * ms)
        XCTAssertEqual(r.undos.map(\.take), [2, 1, 1])
        XCTAssertEqual(r.errors, [.cannotUndo(phase: .paused), .cannotUndo(phase: .stopped)])
        XCTAssertEqual(r.errors.map(\.description), [
            "cannot undo: no take left to remove (use 'reelctl stop' to end, or 'reelctl resume' to record)",
            "cannot undo: the recording is stopping"])
        XCTAssertEqual(r.frames.map(\.n), frames(36..<45))
        XCTAssertEqual(r.frames.map(\.out), outputs(9))
        XCTAssertEqual(r.audio, samples(1200..<1500))
    }

    func testStopWithNoTakeLeftKeepsNothing() {
        let r = run([(500 * ms, .undo), (700 * ms, .stop)], until: 2000 * ms)
        XCTAssertTrue(r.tl.keepsNothing)
        XCTAssertTrue(r.tl.isFinished)
        XCTAssertEqual(r.frames.count, 0)
        XCTAssertEqual(r.audio.count, 0)
        XCTAssertEqual(r.tl.takes, [])
        XCTAssertFalse(run([(500 * ms, .stop)], until: 1000 * ms).tl.keepsNothing)
    }

    func testTheCapStopsToTheFrameAndToTheSample() {
        // Cap 1.01 s: frames with output time < 1.01 s (0..30), exactly 1010 samples.
        let r = run([], until: 3000 * ms, cap: 1010 * ms)
        XCTAssertEqual(r.frames.map(\.n), frames(0..<31))
        XCTAssertEqual(r.audio, samples(0..<1010))
        XCTAssertTrue(r.tl.capReached)
        XCTAssertEqual(r.tl.phase, .stopped)
        XCTAssertEqual(r.tl.remaining, 0)
        XCTAssertEqual(r.tl.takes, [Timeline.Take(number: 1, label: nil, outputStart: 0, duration: 1010 * ms)])
        XCTAssertTrue(r.tl.isFinished)
    }

    func testTheCapFallsInsideALaterTakeAndAnUndoGivesTheTimeBack() {
        // 1 s kept, 0.3 s undone (given back), then the cap of 1.5 s ends take 2 after 0.5 s.
        let r = run([(1000 * ms, .pause), (2000 * ms, .resume(nil)), (2300 * ms, .undo), (4000 * ms, .resume(nil)),
                     (6000 * ms, .pause)], until: 8000 * ms, cap: 1500 * ms)
        XCTAssertEqual(r.errors, [.wrongPhase(request: .pause, phase: .stopped)], "the cap stopped it at 4.5 s")
        XCTAssertEqual(r.frames.map(\.n), frames(0..<30) + frames(120..<135))
        XCTAssertEqual(r.frames.map(\.out), outputs(45))
        XCTAssertEqual(r.audio, samples(0..<1000) + samples(4000..<4500))
        XCTAssertTrue(r.tl.capReached)
        XCTAssertEqual(r.tl.takes.map(\.duration), [1000 * ms, 500 * ms])
    }

    func testRemainingTimeForStatus() {
        var tl = Timeline(start: 0, hasVideo: false, audio: af, maxDuration: 10 * 1000 * ms)
        tl.advance(to: 3000 * ms)
        XCTAssertEqual(tl.remaining, 7000 * ms)
        try! tl.request(.pause, at: 4000 * ms)
        tl.advance(to: 9000 * ms)
        XCTAssertEqual(tl.remaining, 6000 * ms, "a pause uses no time")
        _ = try! tl.undo(at: 9000 * ms)
        XCTAssertEqual(tl.remaining, 10000 * ms, "an undo gives it back")
        XCTAssertNil(Timeline(start: 0, hasVideo: true, audio: nil).remaining)
    }

    func testAPauseLandingOnTheCapLeavesNoTimeAndAResumeStopsAtOnce() {
        // Cap 1.01 s; the pause asked at 1.005 s cuts on frame 31 (1.0333 s), past the cap: the
        // take ends at the cap, the recording stays paused; the resume stops it at once.
        let r = run([(1005 * ms, .pause), (2000 * ms, .resume(nil))], until: 4000 * ms, cap: 1010 * ms)
        XCTAssertEqual(r.frames.map(\.n), frames(0..<31))
        XCTAssertEqual(r.audio, samples(0..<1010))
        XCTAssertEqual(r.tl.phase, .stopped)
        XCTAssertTrue(r.tl.capReached)
        XCTAssertTrue(r.tl.isFinished)
    }

    func testVideoOnlyUndoAndCap() {
        let r = run([(1000 * ms, .pause), (2000 * ms, .resume(nil)), (2500 * ms, .undo), (3000 * ms, .resume(nil))],
                    until: 6000 * ms, cap: 2000 * ms, audio: false)
        XCTAssertEqual(r.frames.map(\.n), frames(0..<30) + frames(90..<120))
        XCTAssertEqual(r.frames.map(\.out), outputs(60))
        XCTAssertTrue(r.tl.capReached)
        XCTAssertEqual(r.tl.takes.map(\.duration), [1000 * ms, 1000 * ms])
    }

    func testAudioOnlyCapAndUndo() {
        var tl = Timeline(start: 0, hasVideo: false, audio: af, maxDuration: 1500 * ms)
        tl.audioArrived(count: 4000, captureTime: 0)
        try! tl.request(.pause, at: 1000 * ms)
        try! tl.request(.resume, at: 2000 * ms)
        let u = try! tl.undo(at: 2200 * ms)
        XCTAssertEqual(u.take, 2)
        try! tl.request(.resume, at: 2500 * ms)
        tl.advance(to: 4000 * ms)
        var actions: [Timeline.AudioAction] = []
        while let a = tl.nextAudioAction() { actions.append(a) }
        XCTAssertEqual(actions, [.keep(1000), .drop(1500), .keep(500), .drop(1000)])
        XCTAssertTrue(tl.capReached)
        XCTAssertTrue(tl.isFinished)
        XCTAssertEqual(tl.takes.map(\.duration), [1000 * ms, 500 * ms])
    }

    func testWithACapAnUndoOfATakeWhoseStartIsPendingWaitsForIt() {
        // Cap 1.2 s, video 300 ms late. The resume at 1000 ms and the undo at 1100 ms come before
        // the resume's frame: the undo is settled when it arrives (asked before X = 1.2 s + ...).
        let r = run([(1000 * ms, .pause), (1000 * ms, .resume(nil)), (1100 * ms, .undo), (1150 * ms, .undo),
                     (2000 * ms, .resume(nil))], until: 4000 * ms, cap: 1200 * ms, videoLatency: 300 * ms)
        XCTAssertEqual(r.errors, [.undoPending])
        XCTAssertEqual(r.undos.first?.framesRemoved, 0)
        XCTAssertEqual(r.frames.map(\.n), frames(0..<30) + frames(60..<66))
        XCTAssertEqual(r.frames.map(\.out), outputs(36))
        XCTAssertEqual(r.audio, samples(0..<1000) + samples(2000..<2200))
        XCTAssertTrue(r.tl.capReached)
    }
}
