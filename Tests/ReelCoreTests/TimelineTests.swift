import XCTest
import ReelTestSupport
@testable import ReelCore

/// Deterministic random numbers so every failure reproduces from its seed.

final class TimelineTests: XCTestCase {
    let ms: Nanos = 1_000_000

    /// Feeds whole seconds of frames and 10 ms chunks in capture order, returns what was kept.
    private func run(fps: Rational, rate: Int, requests: [(Nanos, Timeline.Request)], until end: Nanos)
        -> (video: [(Int64, Nanos)], audio: [Timeline.AudioAction], timeline: Timeline)
    {
        let vf = VideoFormat(width: 64, height: 36, fps: fps, pixelFormat: .yuyv)
        let af = AudioFormat(sampleRate: rate, channels: 1)
        var tl = Timeline(start: 0, hasVideo: true, audio: af)
        var reqs = requests[...]
        var video: [(Int64, Nanos)] = []
        var audio: [Timeline.AudioAction] = []
        var n: Int64 = 0, m: Int64 = 0
        let chunk = Int64(rate / 100)
        while true {
            let tv = vf.frameTime(n), ta = af.sampleTime(m)
            let t = min(tv, ta)
            if t > end && reqs.isEmpty { break }
            while let r = reqs.first, r.0 <= t { try! tl.request(r.1, at: r.0); reqs.removeFirst() }
            if tv <= ta {
                if case let .keep(out) = tl.video(at: tv) { video.append((n, out)) }
                n += 1
            } else {
                tl.audioArrived(count: Int(chunk), captureTime: ta)
                m += chunk
            }
            while let a = tl.nextAudioAction() { audio.append(a) }
        }
        return (video, audio, tl)
    }

    /// `endAudio` moves a stop's audio end, and only within what is still open: not before the
    /// samples already kept, not past the cap, not after a stop while paused.
    func testEndAudioMovesOnlyAStopsUndecidedEnd() {
        let af = AudioFormat(sampleRate: 48000, channels: 1)
        func take(stopAt: Nanos, paused: Bool = false, cap: Nanos? = nil, to end: Nanos) -> (Nanos?, Int64) {
            var tl = Timeline(start: 0, hasVideo: true, audio: af, maxDuration: cap)
            _ = tl.video(at: 0)
            tl.audioArrived(count: 96000, captureTime: 0)   // 2 s, all there before the stop resolves
            if paused { try! tl.request(.pause, at: stopAt); _ = tl.video(at: stopAt) }
            try! tl.request(.stop, at: stopAt)
            while tl.nextAudioAction() != nil {}             // up to the stop's request instant
            _ = tl.video(at: stopAt + 20 * ms)               // resolves it
            let output = tl.endOutput
            tl.endAudio(atOutput: end)
            while tl.nextAudioAction() != nil {}
            return (output, tl.audioOutput)
        }
        // The stop frame (1.02 s) resolved it; the video's grid ends at 1.0333 s.
        XCTAssertEqual(take(stopAt: 1000 * ms, to: 1_033_333_333).0, 1020 * ms)
        XCTAssertEqual(take(stopAt: 1000 * ms, to: 1_033_333_333).1, 49600)
        XCTAssertEqual(take(stopAt: 1000 * ms, to: 1010 * ms).1, 48480)
        // Up to the request (1 s) was kept already: no earlier.
        XCTAssertEqual(take(stopAt: 1000 * ms, to: 900 * ms).1, 48000)
        // Not past the cap.
        XCTAssertEqual(take(stopAt: 1000 * ms, cap: 1025 * ms, to: 1_033_333_333).1, 49200)
        // A stop while paused: the pause ended the take (at 1 s); nothing moves.
        XCTAssertNil(take(stopAt: 1000 * ms, paused: true, to: 1_033_333_333).0)
        XCTAssertEqual(take(stopAt: 1000 * ms, paused: true, to: 1_033_333_333).1, 48000)
    }

    func testThreeSegmentsAt30fps48k() {
        let r = run(fps: Rational(30), rate: 48000,
                    requests: [(2000 * ms, .pause), (3000 * ms, .resume), (4500 * ms, .pause), (6000 * ms, .resume), (7000 * ms, .stop)],
                    until: 7100 * ms)
        let kept = r.video.map(\.0)
        XCTAssertEqual(kept, Array(0..<60) + Array(90..<135) + Array(180..<210))
        // Output steps by exactly one frame everywhere, including across the resumes.
        let vf = VideoFormat(width: 64, height: 36, fps: Rational(30), pixelFormat: .yuyv)
        for (i, (_, out)) in r.video.enumerated() { XCTAssertEqual(out, vf.frameTime(Int64(i)), "frame \(i)") }
        // Audio: keep 2 s, drop 1 s, keep 1.5 s, drop 1.5 s, keep 1 s (merged runs).
        var keptSamples = 0, dropped = 0
        for a in r.audio { if case let .keep(k) = a { keptSamples += k }; if case let .drop(d) = a { dropped += d } }
        XCTAssertEqual(keptSamples, 48000 * 9 / 2)
        XCTAssertEqual(r.timeline.audioOutput, Int64(keptSamples))
        XCTAssertTrue(r.timeline.isFinished)
        XCTAssertEqual(r.timeline.segments.count, 3)
        XCTAssertEqual(r.timeline.currentOffset, 2500 * ms)
    }

    func testCutsSnapToTheFrameGrid() {
        // A pause at 1.010 s snaps to frame 31 (1.0333 s); the resume at 2.001 s to frame 61.
        let r = run(fps: Rational(30), rate: 44100,
                    requests: [(1010 * ms, .pause), (2001 * ms, .resume), (3000 * ms, .stop)], until: 3100 * ms)
        XCTAssertEqual(r.video.map(\.0), Array(0..<31) + Array(61..<90))
        XCTAssertEqual(r.timeline.currentOffset, 1_000_000_000) // 30 frames = 44100 samples exactly
        XCTAssertEqual(r.timeline.audioOutput, 44100 * 2)
    }

    func testWrongPhaseRequestsAreRefusedAndHarmNothing() {
        var tl = Timeline(start: 0, hasVideo: true, audio: nil)
        XCTAssertThrowsError(try tl.request(.resume, at: 10)) { XCTAssertEqual($0 as? Timeline.RequestError, .wrongPhase(request: .resume, phase: .recording)) }
        try! tl.request(.pause, at: 10)
        XCTAssertThrowsError(try tl.request(.pause, at: 20))
        try! tl.request(.stop, at: 30)
        XCTAssertThrowsError(try tl.request(.resume, at: 40))
        XCTAssertThrowsError(try tl.request(.stop, at: 40))
        XCTAssertEqual(tl.phase, .stopped)
        XCTAssertEqual(tl.video(at: 0), .keep(outputTime: 0))
        XCTAssertEqual(tl.video(at: 33), .drop)
        XCTAssertTrue(tl.isFinished)
    }

    func testAudioWaitsForAnUnresolvedCutInsteadOfGuessing() {
        let af = AudioFormat(sampleRate: 48000, channels: 1)
        var tl = Timeline(start: 0, hasVideo: true, audio: af)
        _ = tl.video(at: 0)
        try! tl.request(.pause, at: 500 * ms)
        // Audio for the first second arrives before any video past the pause request.
        tl.audioArrived(count: 48000, captureTime: 0)
        XCTAssertEqual(tl.nextAudioAction(), .keep(24000)) // up to the request: decidable
        XCTAssertNil(tl.nextAudioAction())                  // beyond: the cut is not yet known
        _ = tl.video(at: 533 * ms + 333_333)                // frame 16 resolves the pause at 533.33 ms
        XCTAssertEqual(tl.nextAudioAction(), .keep(1600))
        XCTAssertNil(tl.nextAudioAction())                  // a resume could still come at the horizon
        tl.advance(to: 1000 * ms)
        XCTAssertEqual(tl.nextAudioAction(), .drop(22400))
    }

    func testLateAudioSourceIsPaddedWithSilenceAtTheStart() {
        let af = AudioFormat(sampleRate: 48000, channels: 1)
        var tl = Timeline(start: 0, hasVideo: true, audio: af)
        _ = tl.video(at: 0)
        tl.audioArrived(count: 480, captureTime: 5 * ms) // first sample 5 ms after the start cut
        tl.advance(to: 100 * ms)
        XCTAssertEqual(tl.nextAudioAction(), .silence(240))
        XCTAssertEqual(tl.nextAudioAction(), .keep(480))
    }

    func testStalledVideoDoesNotHoldAudioForever() {
        let af = AudioFormat(sampleRate: 48000, channels: 1)
        var tl = Timeline(start: 0, hasVideo: true, audio: af)
        _ = tl.video(at: 0)
        tl.audioArrived(count: 48000, captureTime: 0)
        try! tl.request(.stop, at: 300 * ms)
        tl.advance(to: 5000 * ms) // a slow pipeline is no reason to give up on the frame grid
        XCTAssertFalse(tl.isStopResolved)
        tl.videoStalled(upTo: 500 * ms) // no frame has arrived for a while: resolve at the request
        XCTAssertTrue(tl.isStopResolved)
        XCTAssertEqual(tl.nextAudioAction(), .keep(14400))
        XCTAssertEqual(tl.nextAudioAction(), .drop(33600))
        XCTAssertTrue(tl.isFinished)
    }

    func testALaggingPipelineStillCutsOnTheFrameGrid() {
        // The pipeline processes a pause 2 s after it was asked for, frames still queued: the
        // cut is the first frame at or after the request, exactly as without the lag.
        var tl = Timeline(start: 0, hasVideo: true, audio: AudioFormat(sampleRate: 48000, channels: 1))
        let vf = VideoFormat(width: 64, height: 36, fps: Rational(30), pixelFormat: .yuyv)
        for n: Int64 in 0..<30 { _ = tl.video(at: vf.frameTime(n)) }
        try! tl.request(.pause, at: 1010 * ms)
        tl.advance(to: 3010 * ms)
        XCTAssertEqual(tl.video(at: vf.frameTime(30)), .keep(outputTime: vf.frameTime(30)))
        XCTAssertEqual(tl.video(at: vf.frameTime(31)), .drop)
        XCTAssertEqual(tl.segments.first?.end, vf.frameTime(31))
    }

    func testMissingAudioAtStopIsFilledWithSilence() {
        let af = AudioFormat(sampleRate: 48000, channels: 1)
        var tl = Timeline(start: 0, hasVideo: true, audio: af)
        _ = tl.video(at: 0)
        tl.audioArrived(count: 4800, captureTime: 0)
        try! tl.request(.stop, at: 200 * ms)
        _ = tl.video(at: 200 * ms)
        XCTAssertEqual(tl.nextAudioAction(), .keep(4800))
        XCTAssertNil(tl.nextAudioAction())
        XCTAssertFalse(tl.isFinished)
        XCTAssertEqual(tl.audioNeededForFinish, 9600)
        XCTAssertEqual(tl.silenceToFinish(), 9600 - 4800)
        XCTAssertTrue(tl.isFinished)
        XCTAssertEqual(tl.audioOutput, 9600)
    }

    func testVideoOnlyAndAudioOnly() {
        var v = Timeline(start: 0, hasVideo: true, audio: nil)
        XCTAssertEqual(v.video(at: 0), .keep(outputTime: 0))
        try! v.request(.pause, at: 10 * ms)
        XCTAssertEqual(v.video(at: 40 * ms), .drop)
        try! v.request(.resume, at: 100 * ms)
        XCTAssertEqual(v.video(at: 120 * ms), .keep(outputTime: 40 * ms)) // offset = 120 - 40
        var a = Timeline(start: 0, hasVideo: false, audio: AudioFormat(sampleRate: 1000, channels: 1))
        a.audioArrived(count: 1000, captureTime: 0)
        try! a.request(.pause, at: 100 * ms)
        try! a.request(.resume, at: 300 * ms)
        try! a.request(.stop, at: 500 * ms)
        XCTAssertEqual(a.nextAudioAction(), .keep(100))
        XCTAssertEqual(a.nextAudioAction(), .drop(200))
        XCTAssertEqual(a.nextAudioAction(), .keep(200))
        XCTAssertEqual(a.nextAudioAction(), .drop(500))
        XCTAssertTrue(a.isFinished)
    }

    /// Each kept frame and kept run of samples says which take it belongs to: numbered from 1 by
    /// start and resumes, with the label given.
    func testKeptVideoAndAudioSayTheirTake() {
        var tl = Timeline(start: 0, hasVideo: true, audio: AudioFormat(sampleRate: 1000, channels: 1), label: "first")
        XCTAssertNil(tl.videoTake)
        XCTAssertEqual(tl.video(at: 0), .keep(outputTime: 0))
        XCTAssertEqual(tl.videoTake?.number, 1); XCTAssertEqual(tl.videoTake?.label, "first")
        try! tl.request(.pause, at: 10 * ms)
        XCTAssertEqual(tl.video(at: 40 * ms), .drop)
        try! tl.request(.resume, at: 100 * ms)
        XCTAssertEqual(tl.video(at: 120 * ms), .keep(outputTime: 40 * ms))
        XCTAssertEqual(tl.videoTake?.number, 2); XCTAssertEqual(tl.videoTake?.label, nil)
        try! tl.request(.pause, at: 130 * ms)
        try! tl.request(.resume, at: 140 * ms, label: "third")
        XCTAssertEqual(tl.video(at: 160 * ms), .keep(outputTime: 80 * ms))   // both cuts on this frame: no pause
        XCTAssertEqual(tl.videoTake?.number, 3); XCTAssertEqual(tl.videoTake?.label, "third")
        tl.audioArrived(count: 1000, captureTime: 0)
        XCTAssertEqual(tl.nextAudioAction(), .keep(40))
        XCTAssertEqual(tl.audioTake?.number, 1)
        XCTAssertEqual(tl.nextAudioAction(), .drop(80))
        XCTAssertEqual(tl.nextAudioAction(), .keep(40))
        XCTAssertEqual(tl.audioTake?.number, 2)
    }

    func testAFutureStopWaitsForItsFrameAndAudioIsDecidedUpToIt() {
        // A scheduled stop (one-shot recordings, a file's end) lies ahead of the media position.
        let af = AudioFormat(sampleRate: 1000, channels: 1)
        var tl = Timeline(start: 0, hasVideo: true, audio: af)
        XCTAssertEqual(tl.video(at: 0), .keep(outputTime: 0))
        try! tl.request(.stop, at: 2000 * ms)
        XCTAssertEqual(tl.video(at: 1000 * ms), .keep(outputTime: 1000 * ms))
        tl.audioArrived(count: 3000, captureTime: 0)
        XCTAssertEqual(tl.nextAudioAction(), .keep(2000)) // nothing can cut before the pending stop
        XCTAssertNil(tl.nextAudioAction())
        XCTAssertEqual(tl.video(at: 2000 * ms), .drop)
        XCTAssertEqual(tl.nextAudioAction(), .drop(1000))
        XCTAssertTrue(tl.isFinished)
    }

    func testEndOfVideoResolvesEveryPendingCutAtTheEnd() {
        // A one-shot schedule: pause at 2 s, resume at 3 s, stop at 10 s; the file ends at 2.5 s.
        let af = AudioFormat(sampleRate: 1000, channels: 1)
        var tl = Timeline(start: 0, hasVideo: true, audio: af)
        try! tl.request(.pause, at: 2000 * ms)
        try! tl.request(.resume, at: 3000 * ms)
        try! tl.request(.stop, at: 10000 * ms)
        let vf = VideoFormat(width: 64, height: 36, fps: Rational(30), pixelFormat: .yuyv)
        for n: Int64 in 0..<75 { _ = tl.video(at: vf.frameTime(n)) }  // frames up to 2.467 s
        tl.audioArrived(count: 2500, captureTime: 0)
        tl.videoEnded(at: 2_500_000_000)
        XCTAssertTrue(tl.isStopResolved)
        XCTAssertEqual(tl.nextAudioAction(), .keep(2000))   // up to the pause (frame 60, 2.000 s)
        XCTAssertEqual(tl.nextAudioAction(), .drop(500))
        XCTAssertTrue(tl.isFinished)
        XCTAssertEqual(tl.segments.map(\.end), [2000 * ms, 2500 * ms]) // the resumed span is empty
    }
}
