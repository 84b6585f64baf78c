import XCTest
import ReelTestSupport
@testable import ReelCore

/// A whole recording on a manual clock: scripted sources deliver into a queue at set arrival
/// times, and the loop `RecordingSession.run` runs (wake, event, actions until nil) drives a real
/// `SessionMachine` (and its real `Timeline`) with no threads, no sleeps and no real time. The
/// fake sink records what the encoders and muxer would have received: each frame's pts, the audio
/// as runs of source samples or silence, the snapshots published, and how the recording ended.
struct ManualSession {
    enum Delivery {
        case frame(Nanos)                                   // capture time
        case chunk(frames: Int, sample: Int64, time: Nanos)
        case request(Timeline.Request, at: Nanos?, label: String? = nil)
        case undo(at: Nanos?)
        case failed(String)
        case ended(at: Nanos, video: Bool)
    }
    struct WriteError: Error, CustomStringConvertible { var description: String }
    /// Output audio: `count` source samples from number `from`, or silence (`from` nil).
    struct Run: Equatable, CustomStringConvertible {
        var from: Int64?
        var count: Int64
        var description: String { "\(from.map(String.init) ?? "silence")+\(count)" }
    }

    let video: VideoFormat?
    let audioFormat: AudioFormat?
    var machine: SessionMachine
    var clock: Nanos
    private var deliveries: [(at: Nanos, seq: Int, what: Delivery)] = []
    private var videoArrivals: [Nanos] = []
    private var lastVideoArrival: Nanos
    /// When each capture thread exits (nil: it runs to the end).
    var videoExitsAt: Nanos?
    var audioExitsAt: Nanos?
    /// From this instant every encode (video, audio or silence) throws, as a full disk does.
    var writeFailsAt: Nanos?
    /// From this instant the sync thread reports a failed fdatasync.
    var syncFailsAt: Nanos?
    /// Source samples delivered by the microphone (its next sample number).
    private(set) var microphoneDelivered: Int64 = 0

    // What the sink received.
    private(set) var videoPTS: [Int64] = []
    /// Takes begun, as the muxer is told: with video at the pts of their first encoded frame
    /// (`VideoDecision.encode`'s newTake), without video at their first kept sample (`.beginTake`).
    private(set) var takes: [Take] = []
    /// With video: where each take's audio begins (`.beginAudioTake`), as the muxer is told.
    private(set) var audioTakes: [Take] = []
    struct Take: Equatable { var index: Int; var label: String?; var start: Int64 }
    private(set) var videoCaptured: [Nanos] = []
    private(set) var audio: [Run] = []
    private var fifo: [Run] = []
    private(set) var published: [Nanos] = []
    private(set) var requestsPublished = 0
    private(set) var replies: [Result<Timeline.Phase, Timeline.RequestError>] = []
    private(set) var undoReplies: [Result<SessionMachine.Rollback, Timeline.RequestError>] = []
    private(set) var capReached: [Nanos] = []
    private(set) var warnings: [String] = []
    private(set) var stoppedForSourceFailure: [String] = []
    private(set) var ending: SessionMachine.Ending?
    private(set) var endedAt: Nanos?
    private(set) var encodedAfterFailure = 0
    private(set) var finalProgress: SessionMachine.Progress?
    private(set) var sinkErrors: [String] = []
    private var failedAt: Nanos?

    init(fps: Rational? = Rational(30), audio: AudioFormat? = AudioFormat(sampleRate: 48000, channels: 1), paced: Bool = true,
         start: Nanos, schedule: [(Timeline.Request, Nanos)] = [], maxDuration: Nanos? = nil) {
        video = fps.map { VideoFormat(width: 64, height: 36, fps: $0, pixelFormat: .i420) }
        audioFormat = audio
        var config = SessionMachine.Configuration(videoFPS: fps, audio: audio, paced: paced)
        config.maxDuration = maxDuration
        machine = SessionMachine(config, start: start, schedule: schedule)
        clock = start
        lastVideoArrival = start
    }

    private mutating func add(_ at: Nanos, _ d: Delivery) { deliveries.append((at, deliveries.count, d)) }

    /// A camera: frames on its grid from `t0`, captured before `end`, each arriving `latency`
    /// after capture; `missing` frames never come; frame n is stamped `jitter(n)` off its grid time.
    mutating func camera(from t0: Nanos, until end: Nanos, latency: Nanos, missing: (Nanos) -> Bool = { _ in false },
                         jitter: (Int64) -> Nanos = { _ in 0 }) {
        var n: Int64 = 0
        while true {
            let t = t0 + video!.frameTime(n) + jitter(n)
            if t >= end { break }
            if !missing(t) { add(t + latency, .frame(t)); videoArrivals.append(t + latency) }
            n += 1
        }
    }

    /// A microphone: chunks of `chunk` samples from sample 0 at `t0`, each arriving `latency` after
    /// its last sample; samples after `end` are never delivered, nor chunks starting in `lost`.
    mutating func microphone(from t0: Nanos, until end: Nanos, chunk: Int, latency: Nanos, lost: Range<Int64> = 0..<0) {
        let f = audioFormat!
        var m: Int64 = 0
        while t0 + f.sampleTime(m + Int64(chunk)) <= end {
            if !lost.contains(m) {
                add(t0 + f.sampleTime(m + Int64(chunk)) + latency, .chunk(frames: chunk, sample: m, time: t0 + f.sampleTime(m)))
            }
            m += Int64(chunk)
            microphoneDelivered = m
        }
    }

    /// A request arriving at `t` (paced: asked at `t`).
    mutating func request(_ r: Timeline.Request, at t: Nanos, label: String? = nil) { add(t, .request(r, at: t, label: label)) }
    mutating func undo(at t: Nanos) { add(t, .undo(at: t)) }
    mutating func deliver(_ d: Delivery, arriving t: Nanos) { add(t, d) }

    /// The pipeline loop on the manual clock, until the recording ends or the clock passes `limit`.
    mutating func run(until limit: Nanos) {
        deliveries.sort { ($0.at, $0.seq) < ($1.at, $1.seq) }
        videoArrivals.sort()
        var next = 0, arrived = 0
        loop: while clock <= limit {
            // queue.take(until: now + 20 ms): an item already there, or the first to come, or nothing.
            var event: Delivery?
            if next < deliveries.count, deliveries[next].at <= clock + 20_000_000 {
                clock = max(clock, deliveries[next].at)
                event = deliveries[next].what
                next += 1
            } else { clock += 20_000_000 }
            while arrived < videoArrivals.count, videoArrivals[arrived] <= clock { lastVideoArrival = videoArrivals[arrived]; arrived += 1 }
            machine.wake(now: clock, lastVideoArrival: lastVideoArrival)
            do {
                if let event { try handle(event) }
                if let s = syncFailsAt, clock >= s { throw WriteError(description: "cannot sync 'x.mp4.part' to disk: input/output error") }
            } catch { failed(error) }
            let now = clock, vExit = videoExitsAt, aExit = audioExitsAt
            while let action = machine.nextAction(now: now, queueWasEmpty: event == nil, sourceExited: { video in
                (video ? vExit : aExit).map { now >= $0 } ?? false
            }) {
                if case let .finish(e) = action {
                    ending = e; endedAt = clock; finalProgress = machine.progress
                    break loop
                }
                do { try perform(action) } catch { failed(error) }
            }
        }
    }

    private mutating func failed(_ error: any Error) {
        if failedAt == nil { failedAt = clock }
        machine.fail(error is WriteError ? .write("\(error)") : .pipeline("\(error)"))
    }

    private mutating func encode() throws {
        if failedAt != nil { encodedAfterFailure += 1 }
        if let w = writeFailsAt, clock >= w { throw WriteError(description: "no space left on device writing x.mp4.part") }
    }

    private mutating func handle(_ event: Delivery) throws {
        switch event {
        case let .frame(t):
            if case let .encode(pts, newTake) = machine.video(at: t) {
                if let k = newTake { takes.append(Take(index: k.number, label: k.label, start: pts)) }
                try encode()
                videoPTS.append(pts); videoCaptured.append(t)
            }
        case let .chunk(frames, sample, time):
            let take = machine.audio(frames: frames, sample: sample, time: time)
            if take.silence > 0 {
                try machine.audioQueued(frames: take.silence, captureTime: take.silenceTime)
                fifo.append(Run(from: nil, count: Int64(take.silence)))
            }
            if take.frames > 0 {
                try machine.audioQueued(frames: take.frames, captureTime: take.time)
                fifo.append(Run(from: sample + Int64(take.skip), count: Int64(take.frames)))
            }
        case let .request(r, at, label):
            let result = machine.request(r, at: at, label: label)
            if case .success = result { requestsPublished += 1 }
            replies.append(result)
        case let .undo(at):
            let result = machine.undo(at: at)
            undoReplies.append(result)
            guard case let .success(rb) = result else { return }
            // The muxer cuts back: video packets from the removed take's first pts, audio to the count.
            if let from = rb.videoPTS {
                let keep = videoPTS.count - videoPTS.filter { $0 >= from }.count
                if videoPTS.count - keep != Int(rb.framesRemoved) { sinkErrors.append("rollback removes \(videoPTS.count - keep) frames, said \(rb.framesRemoved)") }
                videoPTS.removeLast(videoPTS.count - keep); videoCaptured.removeLast(videoCaptured.count - keep)
            } else if rb.framesRemoved != 0 { sinkErrors.append("frames removed without a pts") }
            if audioTotal - rb.audioSamples != rb.samplesRemoved { sinkErrors.append("rollback removes \(audioTotal - rb.audioSamples) samples, said \(rb.samplesRemoved)") }
            var left = rb.audioSamples
            audio = audio.compactMap { r in
                guard left > 0 else { return nil }
                var r = r; r.count = min(r.count, left); left -= r.count; return r
            }
        case let .failed(msg): machine.sourceFailed(msg)
        case let .ended(at, isVideo): _ = machine.sourceEnded(at: at, isVideo: isVideo)
        }
    }

    private mutating func perform(_ action: SessionMachine.Action) throws {
        switch action {
        case let .encodeAudio(n):
            try encode()
            for r in takeFromFIFO(n) { append(r) }
        case let .dropAudio(n): _ = takeFromFIFO(n)
        case let .beginTake(k, start):
            XCTAssertEqual(start, audioTotal, "a take begins where the audio output is")
            takes.append(Take(index: k.number, label: k.label, start: start))
        case let .beginAudioTake(k, start):
            XCTAssertNotNil(video, "the audio side of a take is announced only with video")
            XCTAssertEqual(start, audioTotal, "a take's audio begins where the audio output is")
            audioTakes.append(Take(index: k.number, label: k.label, start: start))
        case let .encodeSilence(n):
            try encode()
            append(Run(from: nil, count: Int64(n)))
        case let .stopForSourceFailure(msg): stoppedForSourceFailure.append(msg)
        case .publish: published.append(clock)
        case let .lengthCapReached(cap): capReached.append(cap)
        case let .completeWithSilence(n):
            if n > 0 { warnings.append("filled \(n) with silence") }
            try encode()
            append(Run(from: nil, count: Int64(n)))
        case .finish: break
        }
    }

    private mutating func takeFromFIFO(_ n: Int) -> [Run] {
        var left = Int64(n), out: [Run] = []
        while left > 0 {
            guard !fifo.isEmpty else { sinkErrors.append("\(left) samples taken from an empty FIFO"); break }
            let k = min(left, fifo[0].count)
            out.append(Run(from: fifo[0].from, count: k))
            if k == fifo[0].count { fifo.removeFirst() } else { fifo[0].count -= k; fifo[0].from = fifo[0].from.map { $0 + k } }
            left -= k
        }
        return out
    }

    private mutating func append(_ r: Run) {
        guard r.count > 0 else { return }
        if let last = audio.last {
            let joins = (last.from == nil && r.from == nil) || (last.from != nil && r.from != nil && last.from! + last.count == r.from!)
            if joins { audio[audio.count - 1].count += r.count; return }
        }
        audio.append(r)
    }

    var audioTotal: Int64 { audio.reduce(0) { $0 + $1.count } }
    /// When the recording ended (never: `Nanos.max`, so that a bound on it fails).
    var end: Nanos { endedAt ?? .max }
}

final class SessionMachineTests: XCTestCase {
    let ms: Nanos = 1_000_000
    let s: Nanos = 1_000_000_000
    let t0: Nanos = 1000 * 1_000_000_000
    typealias Run = ManualSession.Run

    private func frames(_ r: Range<Int64>, fps: Rational = Rational(30)) -> [Nanos] {
        let f = VideoFormat(width: 64, height: 36, fps: fps, pixelFormat: .i420)
        return r.map { t0 + f.frameTime($0) }
    }

    func testPauseResumeStopCutOnTheFrameGridAndJoinWithoutAGap() {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 4 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 4 * s, chunk: 480, latency: 25 * ms)
        m.request(.pause, at: t0 + 1010 * ms)
        m.request(.resume, at: t0 + 2001 * ms)
        m.request(.stop, at: t0 + 3000 * ms)
        m.run(until: t0 + 10 * s)

        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.replies.map { try? $0.get() }, [.paused, .recording, .stopped])
        XCTAssertEqual(m.requestsPublished, 3)
        // Pause at frame 31 (1.0333 s), resume at frame 61, stop at frame 90: 60 frames, one slot apart.
        XCTAssertEqual(m.videoCaptured, frames(0..<31) + frames(61..<90))
        XCTAssertEqual(m.videoPTS, (0..<60).map { Int64($0) * 3000 })
        // Audio cut at the same instants to the sample: 1.0333 s = 49600, 2.0333 s = 97600, 3 s = 144000.
        XCTAssertEqual(m.audio, [Run(from: 0, count: 49600), Run(from: 97600, count: 46400)])
        XCTAssertEqual(m.sinkErrors, [])
        // Finished as soon as the stop frame and the audio up to it were in (3.025 s), not later.
        XCTAssertLessThanOrEqual(m.end, t0 + 3045 * ms)
        XCTAssertEqual(m.finalProgress?.segmentDurations, [1_033_333_333, 966_666_667])
    }

    /// A stop ends the audio where the video ends, after the last frame's slot, however the stop
    /// frame's timestamp jitters. At that frame's own capture time the audio ended 960 samples
    /// (20 ms) before the video when it was stamped 20 ms early, into the last frame's slot (seen
    /// under emulation), and 672 samples after it when stamped 14 ms late.
    func testTheStopEndsTheAudioWhereTheVideoEnds() {
        for jitter in [-20 * ms, 14 * ms] {
            var m = ManualSession(start: t0)
            m.camera(from: t0, until: t0 + 4 * s, latency: 15 * ms, jitter: { $0 == 90 ? jitter : 0 })
            m.microphone(from: t0, until: t0 + 4 * s, chunk: 480, latency: 25 * ms)
            m.request(.pause, at: t0 + 1010 * ms)
            m.request(.resume, at: t0 + 2001 * ms)
            m.request(.stop, at: t0 + 2975 * ms)   // frame 90 (3 s, give or take the jitter) is the first after it
            m.run(until: t0 + 10 * s)
            let label = "stop frame \(jitter / ms) ms off its grid time"
            XCTAssertEqual(m.ending, .complete, label)
            // 60 frames in slots 0..<60: the video ends at 2 s, sample 96000.
            XCTAssertEqual(m.videoCaptured, frames(0..<31) + frames(61..<90), label)
            XCTAssertEqual(m.videoPTS.last, 59 * 3000, label)
            XCTAssertEqual(m.audio, [Run(from: 0, count: 49600), Run(from: 97600, count: 46400)], label)
            XCTAssertEqual(m.audioTotal, 96000, label)
        }
    }

    /// The output's origin (status `originNs`) is the capture instant of the first frame recorded:
    /// warm sources deliver frames from before the start instant, and those are not recorded.
    func testTheOriginIsTheFirstRecordedFramesCaptureInstant() {
        var m = ManualSession(start: t0 + 40 * ms)
        m.camera(from: t0, until: t0 + 2 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 2 * s, chunk: 480, latency: 25 * ms)
        m.request(.stop, at: t0 + 1 * s)
        XCTAssertNil(m.machine.progress.origin, "no frame yet")
        m.run(until: t0 + 10 * s)
        XCTAssertEqual(m.ending, .complete)
        // Frames 0 and 1 (0 and 33.3 ms) came before the start instant; frame 2 (66.7 ms) is the first.
        XCTAssertEqual(m.videoCaptured.first, frames(2..<3).first)
        XCTAssertEqual(m.finalProgress?.origin, frames(2..<3).first)
    }

    /// Each take begins on its first frame given to the encoder, at that frame's pts: take 1 at
    /// 0, a resume's take at the first frame at or after it. A take that kept no frame (paused
    /// again before its first frame) has no start, and the next keeps its own number.
    func testTakesBeginOnTheirFirstEncodedFrame() {
        typealias Take = ManualSession.Take
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 5 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 5 * s, chunk: 480, latency: 25 * ms)
        m.request(.pause, at: t0 + 1010 * ms)
        m.request(.resume, at: t0 + 2001 * ms, label: "second")   // frame 61 (2.0333 s)
        m.request(.pause, at: t0 + 2500 * ms)                     // frame 75
        m.request(.resume, at: t0 + 3001 * ms)                    // frame 91 (3.0333 s)
        m.request(.pause, at: t0 + 3010 * ms)                     // also frame 91: take 3 keeps nothing
        m.request(.resume, at: t0 + 3500 * ms)                    // frame 105 (3.5 s)
        m.request(.stop, at: t0 + 4000 * ms)
        m.run(until: t0 + 10 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.videoCaptured, frames(0..<31) + frames(61..<75) + frames(105..<120))
        // Output frames 0, 31 and 45, each 3000 ticks of 1/90000.
        XCTAssertEqual(m.takes, [Take(index: 1, label: nil, start: 0), Take(index: 2, label: "second", start: 31 * 3000),
                                 Take(index: 4, label: nil, start: 45 * 3000)])
        for k in m.takes { XCTAssertTrue(m.videoPTS.contains(k.start), "take \(k.index) starts on an encoded frame") }
    }

    /// Without video a take begins on its first kept sample, at its output sample number, announced
    /// before those samples are encoded.
    func testAudioOnlyTakesBeginOnTheirFirstKeptSample() {
        typealias Take = ManualSession.Take
        var m = ManualSession(fps: nil, start: t0)
        m.microphone(from: t0, until: t0 + 4 * s, chunk: 480, latency: 25 * ms)
        m.request(.pause, at: t0 + 1000 * ms)
        m.request(.resume, at: t0 + 2000 * ms, label: "b")
        m.request(.pause, at: t0 + 2500 * ms)
        m.request(.resume, at: t0 + 3001 * ms)
        m.request(.stop, at: t0 + 3500 * ms)
        m.run(until: t0 + 10 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.audio, [Run(from: 0, count: 48000), Run(from: 96000, count: 24000), Run(from: 144048, count: 23952)])
        XCTAssertEqual(m.takes, [Take(index: 1, label: nil, start: 0), Take(index: 2, label: "b", start: 48000),
                                 Take(index: 3, label: nil, start: 72000)])
        XCTAssertEqual(m.finalProgress?.origin, t0, "without video the output starts at the start instant")
    }

    func testStatusIsPublishedAtOnceThenEveryTenthOfASecond() {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 3 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 3 * s, chunk: 441, latency: 25 * ms)
        m.request(.stop, at: t0 + 2 * s)
        m.run(until: t0 + 10 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.published.first, t0 + 15 * ms, "the first wake publishes")
        let gaps = zip(m.published.dropFirst(), m.published).map { $0 - $1 }
        XCTAssertGreaterThan(gaps.count, 15)
        for g in gaps { XCTAssertTrue((100 * ms)...(120 * ms) ~= g, "publish gap \(g) ns: \(m.published)") }
    }

    func testACameraThatStallsDoesNotHoldTheCutsOrTheAudio() {
        // No frame captured in [2 s, 4 s), no error. The pause at 2.5 s resolves at its request
        // instant once video has not arrived for 1 s; the resume at 3.5 s waits for the camera,
        // which is back at 4 s, so it cuts on the frame at 4 s.
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 6 * s, latency: 15 * ms) { ($0 - self.t0) >= 2 * self.s && ($0 - self.t0) < 4 * self.s }
        m.microphone(from: t0, until: t0 + 6 * s, chunk: 480, latency: 25 * ms)
        m.request(.pause, at: t0 + 2500 * ms)
        m.request(.resume, at: t0 + 3500 * ms)
        m.request(.stop, at: t0 + 5000 * ms)
        m.run(until: t0 + 20 * s)

        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.audio, [Run(from: 0, count: 120_000), Run(from: 192_000, count: 48_000)])
        XCTAssertEqual(m.videoCaptured, frames(0..<60) + frames(120..<150))
        // The pause took 1.5 s of audio (72000 samples): the frame at 4 s lands at 2.5 s, slot 75.
        XCTAssertEqual(m.videoPTS, (0..<60).map { Int64($0) * 3000 } + (75..<105).map { Int64($0) * 3000 })
        XCTAssertLessThanOrEqual(m.end, t0 + 5045 * ms)
    }

    func testACameraThatHangsForGoodStillStops() {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 2 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 10 * s, chunk: 480, latency: 25 * ms)
        m.request(.stop, at: t0 + 3 * s)
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.videoCaptured, frames(0..<60))
        XCTAssertEqual(m.audio, [Run(from: 0, count: 144_000)])
        // Both tracks end at the stop's 3 s, on the grid: the last frame (slot 59) lasts until there.
        XCTAssertEqual(m.machine.videoEndPTS, 270_000)
        // The stop resolves once video has been missing for 1 s past it (last frame arrived at 1.98 s).
        XCTAssertGreaterThanOrEqual(m.end, t0 + 4 * s)
        XCTAssertLessThanOrEqual(m.end, t0 + 4040 * ms)
    }

    /// A camera gap just before a stop off the grid: the take still ends on the video grid (the
    /// first slot at or after the stop's instant), audio to the sample, and the last frame lasts
    /// until there, so neither track is shorter than the other.
    func testACameraGapBeforeAStopEndsBothTracksOnTheGrid() {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 2 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 10 * s, chunk: 480, latency: 25 * ms)
        m.request(.stop, at: t0 + 3010 * ms)
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.videoCaptured, frames(0..<60))
        // 3.010 s lies in slot 90; the grid point at or after it is slot 91's start, 3.0333 s.
        XCTAssertEqual(m.audio, [Run(from: 0, count: 145_600)])
        XCTAssertEqual(m.machine.videoEndPTS, 91 * 3000)
    }

    /// Frames missing just before a pause (a camera gap shorter than the stall limit), then a stop
    /// while paused: the take's audio ends where the pause's frame's slot begins, and the last frame
    /// lasts until there, so the file's tracks end on the same sample.
    func testAGapBeforeAPauseThenAStopWhilePausedEndsBothTracksTogether() {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 6 * s, latency: 15 * ms) { ($0 - self.t0) >= 2 * self.s && ($0 - self.t0) < 2500 * self.ms }
        m.microphone(from: t0, until: t0 + 6 * s, chunk: 480, latency: 25 * ms)
        m.request(.pause, at: t0 + 2200 * ms)
        m.request(.stop, at: t0 + 3 * s)
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.videoCaptured, frames(0..<60))
        // The pause resolves on the frame at 2.5 s (slot 75): audio to 2.5 s, the last frame (slot 59) until there.
        XCTAssertEqual(m.audio, [Run(from: 0, count: 120_000)])
        XCTAssertEqual(m.machine.videoEndPTS, 75 * 3000)
    }

    func testAMicrophoneThatStopsDeliveringIsCompletedWithSilenceAfterTwoSeconds() {
        // The ALSA thread hangs at 2.5 s (alive, no error): the stop at 4 s resolves on the frame at
        // 4 s (arriving 4.015 s); 2 s later the missing 1.5 s of audio is filled with silence.
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 8 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 2500 * ms, chunk: 480, latency: 25 * ms)
        m.request(.stop, at: t0 + 4 * s)
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.audio, [Run(from: 0, count: 120_000), Run(from: nil, count: 72_000)])
        XCTAssertEqual(m.warnings, ["filled 72000 with silence"])
        XCTAssertEqual(m.videoCaptured, frames(0..<120))
        XCTAssertGreaterThan(m.end, t0 + 6015 * ms)
        XCTAssertLessThanOrEqual(m.end, t0 + 6040 * ms)
    }

    func testLostSamplesAreFilledWithSilenceInPlace() {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 3 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 3 * s, chunk: 480, latency: 25 * ms, lost: 48_000..<52_800)
        m.request(.stop, at: t0 + 2 * s)
        m.run(until: t0 + 10 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.audio, [Run(from: 0, count: 48_000), Run(from: nil, count: 4_800), Run(from: 52_800, count: 43_200)])
        XCTAssertEqual(m.finalProgress?.audioFilledSamples, 4_800)
        XCTAssertEqual(m.videoPTS.count, 60)
    }

    func testOverlappingAudioIsNeverDuplicated() {
        // A chunk repeating the last 240 samples (and 240 new ones) arrives after sample 48480;
        // the next regular chunk overlaps it by 240 as well.
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 3 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 3 * s, chunk: 480, latency: 25 * ms)
        m.deliver(.chunk(frames: 480, sample: 48_240, time: t0 + 1_005 * ms), arriving: t0 + 1_036 * ms)
        m.request(.stop, at: t0 + 2 * s)
        m.run(until: t0 + 10 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.audio, [Run(from: 0, count: 96_000)])
        XCTAssertEqual(m.finalProgress?.audioFilledSamples, 0)
    }

    func testAMicrophoneFailingMidTakeStopsTheRecordingThere() {
        // The device is unplugged at 2.5 s: its thread reports and exits. The stop lands on the next
        // frame (2.5333 s, sample 121600); the 1600 samples the microphone never gave are silence,
        // at once (its thread has exited), and the recording is cut short, not failed.
        var m = ManualSession(start: t0)
        let why = "ALSA device hw:1,0 disappeared (unplugged?)"
        m.camera(from: t0, until: t0 + 8 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 2500 * ms, chunk: 480, latency: 25 * ms)
        m.deliver(.failed(why), arriving: t0 + 2525 * ms)
        m.audioExitsAt = t0 + 2525 * ms
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.ending, .sourceFailed(why))
        XCTAssertEqual(m.stoppedForSourceFailure, [why])
        XCTAssertEqual(m.videoCaptured, frames(0..<76))
        XCTAssertEqual(m.audio, [Run(from: 0, count: 120_000), Run(from: nil, count: 1_600)])
        XCTAssertLessThan(m.end, t0 + 2600 * ms)
        XCTAssertEqual(m.finalProgress?.sourceError, why)
        XCTAssertEqual(RecordingOutcome.resolve(ending: m.ending ?? .complete, finishError: nil, writeFailure: nil, file: "/v/x.mp4"),
                       .cutShort(kept: .file("/v/x.mp4"), reason: .sourceFailed(why)))
    }

    func testACameraFailingMidTakeEndsTheVideoAndCutsTheAudioThere() {
        // The camera's last frame is at 1.9667 s; its failure arrives at 2.015 s and its thread has
        // exited: the stop resolves at that instant (no frame will come). The take ends on the grid
        // at or after it, 2.0333 s: audio to sample 97600, the last frame lasting until there.
        var m = ManualSession(start: t0)
        let why = "camera /dev/video0 failed: input/output error (unplugged?)"
        m.camera(from: t0, until: t0 + 2 * s, latency: 15 * ms)
        m.deliver(.failed(why), arriving: t0 + 2015 * ms)
        m.videoExitsAt = t0 + 2015 * ms
        m.microphone(from: t0, until: t0 + 8 * s, chunk: 480, latency: 25 * ms)
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.ending, .sourceFailed(why))
        XCTAssertEqual(m.videoCaptured, frames(0..<60))
        XCTAssertEqual(m.audio, [Run(from: 0, count: 97_600)])
        XCTAssertEqual(m.machine.videoEndPTS, 61 * 3000)
        XCTAssertLessThan(m.end, t0 + 2100 * ms)
    }

    func testAFailedWriteEndsTheRecordingAtOnce() {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 6 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 6 * s, chunk: 480, latency: 25 * ms)
        m.request(.stop, at: t0 + 4 * s)
        m.writeFailsAt = t0 + 2 * s
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.ending, .failed(.write("no space left on device writing x.mp4.part")))
        XCTAssertEqual(m.encodedAfterFailure, 0, "something was encoded after the failed write")
        XCTAssertEqual(m.videoCaptured, frames(0..<60), "frames arriving before 2 s")
        XCTAssertLessThan(m.end, t0 + 2020 * ms)
        XCTAssertEqual(m.warnings, [])
        let message = "no space left on device writing x.mp4.part: the disk is full; kept the first 1.5 s as /v/x.mp4 (free space in /v, or lower the bitrate)"
        XCTAssertEqual(RecordingOutcome.resolve(ending: m.ending ?? .complete, finishError: nil, writeFailure: (.file("/v/x.mp4"), message), file: "/v/x.mp4"),
                       .cutShort(kept: .file("/v/x.mp4"), reason: .writeFailed(message)))
    }

    func testAFailedSyncEndsTheRecordingAtOnce() {
        var m = ManualSession(start: t0)
        m.camera(from: t0, until: t0 + 6 * s, latency: 15 * ms)
        m.microphone(from: t0, until: t0 + 6 * s, chunk: 480, latency: 25 * ms)
        m.request(.stop, at: t0 + 4 * s)
        m.syncFailsAt = t0 + 1500 * ms
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.ending, .failed(.write("cannot sync 'x.mp4.part' to disk: input/output error")))
        XCTAssertEqual(m.encodedAfterFailure, 0)
        XCTAssertLessThan(m.end, t0 + 1520 * ms)
        XCTAssertLessThan((m.videoCaptured.last ?? .max), t0 + 1500 * ms)
    }

    func testAudioPilingUpBehindAVideoThatNeverDecidesFails() {
        // Unpaced (no stall rule): a video file that yields no frame while the audio runs on.
        var m = ManualSession(paced: false, start: t0)
        m.microphone(from: t0, until: t0 + 12 * s, chunk: 480, latency: 0)
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.ending, .failed(.audioBacklog(seconds: 10)))
        XCTAssertEqual(SessionMachine.Failure.audioBacklog(seconds: 10).description,
                       "audio backlog exceeded 10 s waiting for video to decide the cuts (is the camera delivering?)")
        XCTAssertEqual(m.audio, [])
        // The chunk that would take the FIFO past 10 s (480000 samples) ends it.
        XCTAssertEqual(m.endedAt, t0 + 1001 * 10 * ms)
        XCTAssertEqual(RecordingOutcome.resolve(ending: m.ending ?? .complete, finishError: nil, writeFailure: nil, file: "/v/x.mp4"),
                       .failed("audio backlog exceeded 10 s waiting for video to decide the cuts (is the camera delivering?)"))
    }

    func testFileSourcesEndTheRecordingAndAShortAudioIsCompletedWithSilence() {
        // reeld record with a schedule: pause at 1 s, resume at 1.5 s; the video file ends at 3 s,
        // the audio file at 2 s.
        var m = ManualSession(paced: false, start: t0, schedule: [(.pause, 1 * s), (.resume, 1500 * ms)])
        m.camera(from: t0, until: t0 + 3 * s, latency: 0)
        m.deliver(.ended(at: t0 + 3 * s, video: true), arriving: t0 + 3 * s)
        m.videoExitsAt = t0 + 3 * s
        m.microphone(from: t0, until: t0 + 2 * s, chunk: 1024, latency: 0)
        m.deliver(.ended(at: t0 + 2 * s, video: false), arriving: t0 + 2 * s)
        m.audioExitsAt = t0 + 2 * s
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.videoCaptured, frames(0..<30) + frames(45..<90))
        XCTAssertEqual(m.videoPTS, (0..<75).map { Int64($0) * 3000 })
        // The audio file held 93 chunks of 1024 (95232 samples): kept up to 1 s, from 1.5 s to its
        // end, then silence to the video's end.
        XCTAssertEqual(m.audio, [Run(from: 0, count: 48_000), Run(from: 72_000, count: 95_232 - 72_000),
                                 Run(from: nil, count: 144_000 - 95_232)])
        XCTAssertEqual(m.audioTotal, 120_000)
    }

    /// `reeld record` on SIGTERM/SIGINT: a stop asked before what its schedule placed later (its
    /// pauses, the stop at --duration) stops the recording at that instant; the later requests
    /// are dropped unresolved, as if never asked.
    func testAStopSupersedesTheScheduleAfterIt() {
        let schedule: [(Timeline.Request, Nanos)] = [(.pause, 4 * s), (.resume, 5 * s), (.stop, 8 * s)]
        // Paced, at 2 s, just after the 2 s frame arrived: the take ends at the next frame, audio
        // with it on the grid (61 frames at 30 fps: sample 97600).
        var m = ManualSession(start: t0, schedule: schedule)
        m.camera(from: t0, until: t0 + 10 * s, latency: 0)
        m.microphone(from: t0, until: t0 + 10 * s, chunk: 480, latency: 0)
        m.request(.stop, at: t0 + 2 * s)
        m.run(until: t0 + 20 * s)
        XCTAssertEqual(m.replies, [.success(.stopped)])
        XCTAssertEqual(m.ending, .complete)
        XCTAssertEqual(m.videoCaptured, frames(0..<61))
        XCTAssertEqual(m.audio, [Run(from: 0, count: 97_600)])
        XCTAssertLessThan(m.endedAt!, t0 + 3 * s)

        // Inside the scheduled pause (4.5 s): the pause stands, the resume and the later stop go.
        var p = ManualSession(start: t0, schedule: schedule)
        p.camera(from: t0, until: t0 + 10 * s, latency: 0)
        p.microphone(from: t0, until: t0 + 10 * s, chunk: 480, latency: 0)
        p.request(.stop, at: t0 + 4500 * ms)
        p.run(until: t0 + 20 * s)
        XCTAssertEqual(p.replies, [.success(.stopped)])
        XCTAssertEqual(p.videoCaptured, frames(0..<120))
        XCTAssertEqual(p.audio, [Run(from: 0, count: 192_000)])
        XCTAssertLessThan(p.endedAt!, t0 + 5 * s)

        // Unpaced (a file read as fast as it goes): at the media position reached when it came.
        var u = ManualSession(paced: false, start: t0, schedule: schedule)
        u.camera(from: t0, until: t0 + 10 * s, latency: 0)
        u.deliver(.request(.stop, at: nil), arriving: t0 + 3 * s + 1)
        u.run(until: t0 + 20 * s)
        XCTAssertEqual(u.replies, [.success(.stopped)])
        XCTAssertEqual(u.ending, .complete)
        XCTAssertEqual(u.videoCaptured, frames(0..<91))

        // A stop after the scheduled one is refused as any second stop is.
        var late = ManualSession(start: t0, schedule: [(.stop, 1 * s)])
        late.camera(from: t0, until: t0 + 3 * s, latency: 0)
        late.request(.stop, at: t0 + 500 * ms)
        late.request(.stop, at: t0 + 700 * ms)
        late.run(until: t0 + 5 * s)
        XCTAssertEqual(late.replies, [.success(.stopped), .failure(.wrongPhase(request: .stop, phase: .stopped))])
        XCTAssertEqual(late.videoCaptured, frames(0..<16))
    }

    func testTypedOutcomes() {
        let f = "/v/x.mp4"
        XCTAssertEqual(RecordingOutcome.resolve(ending: .complete, finishError: nil, writeFailure: nil, file: f), .complete(file: f))
        XCTAssertEqual(RecordingOutcome.resolve(ending: .complete, finishError: "cannot rename", writeFailure: nil, file: f), .failed("cannot rename"))
        XCTAssertEqual(RecordingOutcome.resolve(ending: .sourceFailed("gone"), finishError: "cannot rename", writeFailure: nil, file: f),
                       .failed("cannot rename"))
        XCTAssertEqual(RecordingOutcome.resolve(ending: .failed(.pipeline("x264 failed")), finishError: "cannot rename", writeFailure: nil, file: f),
                       .failed("x264 failed"))
        XCTAssertEqual(RecordingOutcome.resolve(ending: .sourceFailed("gone"), finishError: nil, writeFailure: (.nothing, "full"), file: f),
                       .cutShort(kept: .nothing, reason: .writeFailed("full")))
        XCTAssertEqual(RecordingOutcome.cutShort(kept: .unrecovered("/v/x.mp4.part"), reason: .writeFailed("e")).file, nil)
        XCTAssertEqual(RecordingOutcome.cutShort(kept: .file(f), reason: .sourceFailed("e")).file, f)
    }

    // MARK: Property test

    /// Random rates, latencies, chunk sizes and pause schedules, and sometimes a microphone that
    /// stops delivering, checked against an oracle computed from the frame grid alone.
    func testRandomSessionsMatchTheOracle() {
        var seeds = SplitMix64(seed: 0x5E55_1011)
        let fpsChoices = [Rational(15), Rational(25), Rational(30), Rational(30000, 1001)]
        let rateChoices = [32000, 44100, 48000]
        for trial in 0..<25 {
            let seed = seeds.next()
            var rng = SplitMix64(seed: seed)
            let fps = fpsChoices.randomElement(using: &rng)!
            let rate = rateChoices.randomElement(using: &rng)!
            let vf = VideoFormat(width: 64, height: 36, fps: fps, pixelFormat: .i420)
            let af = AudioFormat(sampleRate: rate, channels: 1)
            let vLatency = Nanos.random(in: 0...300 * ms, using: &rng)
            let aLatency = Nanos.random(in: 0...300 * ms, using: &rng)
            let chunk = Int.random(in: 32...(rate / 50), using: &rng)
            var requests: [(Nanos, Timeline.Request)] = []
            var t = t0
            for _ in 0..<Int.random(in: 0...6, using: &rng) {
                t += Nanos.random(in: 50 * ms...1500 * ms, using: &rng); requests.append((t, .pause))
                t += Nanos.random(in: 50 * ms...1500 * ms, using: &rng); requests.append((t, .resume))
            }
            t += Nanos.random(in: 50 * ms...1500 * ms, using: &rng); requests.append((t, .stop))
            let stopAt = t
            let micEnd = Bool.random(using: &rng) ? t0 + Nanos.random(in: 0...(stopAt - t0), using: &rng) : stopAt + 2 * s
            let label = "trial \(trial) seed \(seed): \(fps) fps, \(rate) Hz, chunk \(chunk), latency \(vLatency)/\(aLatency), mic to \(micEnd - t0)"

            var m = ManualSession(fps: fps, audio: af, start: t0)
            m.camera(from: t0, until: stopAt + 2 * s, latency: vLatency)
            m.microphone(from: t0, until: micEnd, chunk: chunk, latency: aLatency)
            for (rt, r) in requests { m.request(r, at: rt) }
            m.run(until: stopAt + 20 * s)

            // Oracle: each request cuts at the first frame at or after it; audio at the same instants.
            func firstFrame(atOrAfter x: Nanos) -> Int64 {
                var n = max(0, rescale(x - t0, fps.num, nanosPerSecond * fps.den, rounding: .down) - 1)
                while t0 + vf.frameTime(n) < x { n += 1 }
                return n
            }
            var bounds: [(Int64, Int64)] = []   // kept frames [b, e)
            var open: Int64 = 0
            for (rt, r) in requests {
                let c = firstFrame(atOrAfter: rt)
                if r == .resume { open = c } else { bounds.append((open, c)) }
            }
            let sample = { (n: Int64) in af.sampleIndex(at: vf.frameTime(n)) }
            let expectedFrames = bounds.flatMap { frames($0.0..<$0.1, fps: fps) }
            // Every take's audio ends where its video ends, after its last frame's slot (when it
            // kept a frame), but for a pause whose resume comes on the same frame: the take goes on.
            var ends: [Int64] = []
            var framesSoFar: Int64 = 0, before: Int64 = 0
            for (i, (b, e)) in bounds.enumerated() {
                framesSoFar += e - b
                let goesOn = i + 1 < bounds.count && bounds[i + 1].0 == e
                let end = e > b && !goesOn ? sample(b) + af.sampleIndex(at: vf.frameTime(framesSoFar)) - before : sample(e)
                ends.append(end)
                before += end - sample(b)
            }
            let total = zip(bounds, ends).reduce(Int64(0)) { $0 + $1.1 - sample($1.0.0) }
            var expectedAudio: [Run] = []
            for ((b, _), end) in zip(bounds, ends) {
                let lo = sample(b), hi = min(end, m.microphoneDelivered)
                guard hi > lo else { continue }
                if let l = expectedAudio.last, l.from! + l.count == lo { expectedAudio[expectedAudio.count - 1].count += hi - lo }
                else { expectedAudio.append(Run(from: lo, count: hi - lo)) }
            }
            let kept = expectedAudio.reduce(Int64(0)) { $0 + $1.count }
            if total > kept { expectedAudio.append(Run(from: nil, count: total - kept)) }
            let tick = 90_000 * fps.den / fps.num

            XCTAssertEqual(m.ending, .complete, label)
            XCTAssertEqual(m.sinkErrors, [], label)
            XCTAssertEqual(m.videoCaptured, expectedFrames, "kept frames: \(label)")
            XCTAssertEqual(m.videoPTS, (0..<Int64(expectedFrames.count)).map { $0 * tick }, "pts: \(label)")
            XCTAssertEqual(m.audio, expectedAudio, "audio: \(label)")
            XCTAssertEqual(m.audioTotal, total, label)
        }
    }
}
