/// `reelctl verify`'s analysis: a port of scripts/reel_verify.py (`analyze`, `defects`), the
/// project's oracle for recordings of the synthetic sources of /work/shared/test-sources.md.
/// Same measurements and the same thresholds; timestamps are exact (stream ticks and
/// `Rational` seconds), floating point is only used for luma means and the audio envelope.

import ReelCore

public enum Thresholds {
    public static let flash = 200.0           // mean luma below the strip of a flash frame
    public static let pairWindowS = 0.100     // a flash and a beep further apart are unpaired
    public static let aacFrame = 1024
}

// MARK: - Report model

public struct FrameInfo: Sendable {
    public var i: Int
    public var pts: Int64?
    public var t: Rational?          // output time in seconds
    public var ms: UInt32            // the strip's timecode
    public var n: Int64?             // the source frame index it names (nil: no frame carries it)
    public var flash: Bool
    public var lumaBelow: Double
}

public struct GridError: Sendable {
    public var i: Int
    public var pts: Int64
    public var expected: Int64
    public var diffTicks: Int64 { pts - expected }
}

public struct VideoReport: Sendable {
    public var width: Int, height: Int
    public var fps: Rational
    public var fpsFromPts: Rational?
    public var timeBase: Rational
    public var frameTicks: Rational
    public var frameCount: Int
    public var packetCount: Int
    public var firstPts: Int64?, lastPts: Int64?
    public var ptsSteps: [Int64]
    public var ptsGridErrors: [GridError]          // the first 20
    public var ptsGridErrorCount: Int
    public var start: Rational?, end: Rational?, duration: Rational?
    public var stripMarginMin: Double
    public var invalidTimecodes: [Int]             // the first 20
    public var flashCount: Int
    public var flashMismatches: [Int]              // the first 20
    public var frames: [FrameInfo]
    public var frameMs: Double { (Rational(1000) / fps).double }
}

public struct Segment: Sendable {
    public var firstI: Int, lastI: Int
    public var firstMs: UInt32, lastMs: UInt32
    public var firstN: Int64?, lastN: Int64?
    public var frames: Int
    public var outStart: Rational?
    /// Source span covered: [t_first, t_last + one frame).
    public var sourceStart: Rational?, sourceEnd: Rational?
}

public struct Jump: Sendable {
    public var atFrame: Int
    public var outTime: Rational?
    public var pauseFrames: Int64?
    public var pauseMs: Rational?                  // exact: skipped frames / fps * 1000
    public var rawMsJump: Int64
    public var windowSource: (Rational?, Rational?)?
}

public struct BeepInfo: Sendable {
    public var beep: Beep
    public var onset: Double           // output seconds
    public var end: Double
    /// One of two beeps found joined across a resume (`splitAtResumes`).
    public var splitAtResume = false
    public var truncated: Bool { beep.durationMs < 97.0 }
}

public struct AudioReport: Sendable {
    public var sampleRate: Int, channels: Int
    public var samples: Int64
    /// Output time of sample 0: the first decoded frame's pts (priming already dropped).
    public var start: Rational
    public var streamStartTime: Rational?
    public var gaps: [AudioGap]
    public var gapCount: Int
    public var decodedFrames: Int
    public var maxChannelDifference: Int
    public var beeps: [BeepInfo]
    public var duration: Rational { Rational(samples, Int64(max(1, sampleRate))) }
    public var end: Rational { start + duration }
}

public struct Pair: Sendable {
    public var frame: Int
    public var sourceMs: UInt32
    public var t: Rational
    public var beepOnset: Double
    public var offsetMs: Double        // beep onset minus flash time, rounded to 1 us
}

public struct UnpairedFlash: Sendable {
    public var i: Int, t: Rational?, ms: UInt32
    public var nearestBeepMs: Double?
}

public struct UnpairedBeep: Sendable {
    public var onset: Double
    public var reason: String?
    public var durationMs: Double?
    public var phaseOk: Bool?
}

public struct SyncReport: Sendable {
    public var pairs: [Pair]
    public var maxAbsOffsetMs: Double?
    public var meanOffsetMs: Double?
    public var offsetDriftPpm: Double?
    public var unpairedFlashes: [UnpairedFlash]
    public var unpairedBeeps: [UnpairedBeep]
    public var cutBeepsAtResume: [UnpairedBeep]
}

public struct Report: Sendable {
    public var file: String
    public var streams: StreamsInfo
    public var video: VideoReport?
    public var segments: [Segment]
    public var jumps: [Jump]
    public var audio: AudioReport?
    public var sync: SyncReport?
    public var errors: [String]
}

// MARK: - The contract's signals as functions of the source frame index

/// Timecode of source frame n: floor(n / fps * 1000).
public func sourceMs(_ n: Int64, fps: Rational) -> Int64 { (Rational(n) / fps * 1000).floor }

/// The unique frame n with floor(n / fps * 1000) == ms, or nil when no frame carries it.
public func frameIndex(fromMs ms: UInt32, fps: Rational) -> Int64? {
    let n = (Rational(Int64(ms)) * fps / Rational(1000)).ceil
    return sourceMs(n, fps: fps) == Int64(ms) ? n : nil
}

/// Frame n is a flash when n > 0 and floor(t_n) > floor(t_{n-1}).
public func isFlashIndex(_ n: Int64, fps: Rational) -> Bool {
    n > 0 && (Rational(n) / fps).floor > (Rational(n - 1) / fps).floor
}

/// Python's round(x, digits) closely enough for reporting (halves to even).
func pyRound(_ x: Double, _ digits: Int) -> Double {
    var p = 1.0
    for _ in 0..<digits { p *= 10 }
    return (x * p).rounded(.toNearestOrEven) / p
}

// MARK: - analyze

/// Decodes `path` once and reports what it contains. Throws when the file cannot be read at all.
public func analyze(path: String) throws(VerifyError) -> Report {
    let s = try scan(path: path)
    var report = Report(file: path, streams: s.streams, video: nil, segments: [], jumps: [],
                        audio: nil, sync: nil, errors: s.errors)
    if let sv = s.streams.video {
        let v = videoReport(sv, s)
        report.video = v
        (report.segments, report.jumps) = segments(v)
    }
    if let sa = s.streams.audio, let a = s.audio {
        let start = a.firstPts.map { Rational($0) * sa.timeBase } ?? sa.startTime ?? Rational(0)
        let rate = Double(sa.sampleRate)
        report.audio = AudioReport(
            sampleRate: sa.sampleRate, channels: sa.channels, samples: a.samples, start: start,
            streamStartTime: sa.startTime, gaps: a.gaps, gapCount: a.gapCount, decodedFrames: a.frames,
            maxChannelDifference: a.maxChannelDifference,
            beeps: a.beeps.map { BeepInfo(beep: $0, onset: start.double + $0.onsetSample / rate,
                                          end: start.double + $0.endSample / rate) })
    }
    if let v = report.video, let a = report.audio {
        let resumes = report.jumps.compactMap { j in j.outTime.map { (time: $0.double, flash: v.frames[j.atFrame].flash) } }
        report.audio!.beeps = splitAtResumes(a.beeps, resumes: resumes, start: a.start.double,
                                             rate: Double(a.sampleRate), frameS: v.frameMs / 1000)
    }
    if let v = report.video {
        report.sync = sync(v, report.audio, report.jumps)
    }
    return report
}

/// One tone across a resume is two beeps. A pause that began during a beep joins that beep's
/// head to whatever tone the resume starts with, with no dip between, and the detector sees one
/// long tone. Split it where the second beep begins. When the resume's first frame is a flash
/// (`resumes[].flash`), the second is a whole beep: split at its end minus the contract's 100 ms
/// if that lies within a frame of the resume (its onset still measured on the audio, so an A/V
/// offset shows). Otherwise the resume cut into a beep whose flash fell in the pause, and the
/// tone's second part is that beep's tail: split at the resume itself, which `sync` files as a
/// beep cut by the resume. (The end alone cannot tell them apart: at 30 fps a 66.7 ms head and a
/// 66.7 ms tail end one frame after a whole beep from the resume would.) The oracle's
/// `_split_at_resumes`.
func splitAtResumes(_ beeps: [BeepInfo], resumes: [(time: Double, flash: Bool)], start: Double,
                    rate: Double, frameS: Double) -> [BeepInfo] {
    let beepS = 0.1, margin = 0.003
    let resumes = resumes.sorted { $0.time < $1.time }
    var out: [BeepInfo] = []
    for b in beeps {
        var cur = b
        while cur.end - cur.onset > beepS + margin,
              let (r, flash) = resumes.first(where: { cur.onset + margin < $0.time && $0.time < cur.end - margin }) {
            let e = cur.end - beepS
            let cut = flash && abs(e - r) <= frameS + 0.002 ? e : r
            let cutSample = (cut - start) * rate
            var head = cur
            head.end = cut
            head.beep.endSample = cutSample
            head.beep.durationMs = (cut - cur.onset) * 1000
            head.splitAtResume = true
            out.append(head)
            cur.onset = cut
            cur.beep.onsetSample = cutSample
            cur.beep.onsetEnvSample = cutSample
            cur.beep.onsetPhaseSample = nil
            cur.beep.phaseOk = false
            cur.beep.durationMs = (cur.end - cut) * 1000
            cur.splitAtResume = true
        }
        out.append(cur)
    }
    return out
}

/// Frame rate: the stream's r_frame_rate when it agrees with the commonest pts step.
func inferFps(_ rfr: Rational?, steps: [Int64: Int], tb: Rational) -> (Rational?, Rational?) {
    var modeFps: Rational? = nil
    // numpy's unique + argmax: the smallest of the most frequent steps
    if let best = steps.max(by: { $0.value != $1.value ? $0.value < $1.value : $0.key > $1.key }), best.key > 0 {
        modeFps = (Rational(1) / (Rational(best.key) * tb)).limitDenominator(1001)
    }
    if let rfr, rfr.num > 0, modeFps == nil || abs((rfr / modeFps!).double - 1) < 0.02 {
        return (rfr.limitDenominator(1001), modeFps)
    }
    return (modeFps ?? rfr, modeFps)
}

func videoReport(_ sv: VideoStreamInfo, _ s: Scan) -> VideoReport {
    let tb = sv.timeBase
    let pts = s.frames.map(\.pts)
    let allPts = pts.allSatisfy { $0 != nil } ? pts.map { $0! } : nil
    var stepCounts: [Int64: Int] = [:]
    if let p = allPts, p.count > 1 { for k in 1..<p.count { stepCounts[p[k] - p[k - 1], default: 0] += 1 } }
    let (fpsOpt, modeFps) = inferFps(sv.rFrameRate, steps: stepCounts, tb: tb)
    let fps = fpsOpt ?? Rational(1)                 // no rate at all: every timecode will read as foreign
    let frameTicks = Rational(1) / (fps * tb)

    var frames: [FrameInfo] = []
    frames.reserveCapacity(s.frames.count)
    var margin = 255.0
    for (i, f) in s.frames.enumerated() {
        margin = min(margin, f.margin)
        frames.append(FrameInfo(i: i, pts: f.pts, t: f.pts.map { Rational($0) * tb }, ms: f.ms,
                                n: frameIndex(fromMs: f.ms, fps: fps), flash: f.lumaBelow > Thresholds.flash,
                                lumaBelow: pyRound(f.lumaBelow, 1)))
    }
    // the output timestamps must sit on a grid of exactly one frame duration
    var gridErrors: [GridError] = [], gridCount = 0
    if let p = allPts, let p0 = p.first {
        for (i, x) in p.enumerated() {
            let want = p0 + (frameTicks * Int64(i)).roundedHalfEven
            if x != want {
                gridCount += 1
                if gridErrors.count < 20 { gridErrors.append(GridError(i: i, pts: x, expected: want)) }
            }
        }
    }
    let first = pts.first ?? nil, last = pts.last ?? nil
    let endTicks = last.map { Rational($0) + frameTicks }
    return VideoReport(
        width: sv.width, height: sv.height, fps: fps, fpsFromPts: modeFps, timeBase: tb, frameTicks: frameTicks,
        frameCount: frames.count, packetCount: s.videoPackets, firstPts: first, lastPts: last,
        ptsSteps: stepCounts.keys.sorted(), ptsGridErrors: gridErrors, ptsGridErrorCount: gridCount,
        start: first.map { Rational($0) * tb }, end: endTicks.map { $0 * tb },
        duration: endTicks.flatMap { e in first.map { (e - Rational($0)) * tb } },
        stripMarginMin: pyRound(margin, 1),
        invalidTimecodes: Array(frames.filter { $0.n == nil }.map(\.i).prefix(20)),
        flashCount: frames.filter(\.flash).count,
        flashMismatches: Array(frames.filter { f in f.n.map { isFlashIndex($0, fps: fps) != f.flash } ?? false }.map(\.i).prefix(20)),
        frames: frames)
}

/// Runs of frames whose source frame index advances by exactly one; the jumps between them.
func segments(_ v: VideoReport) -> ([Segment], [Jump]) {
    let fps = v.fps
    var segs: [Segment] = []
    var cur: Segment? = nil
    for f in v.frames {
        if var c = cur, let n = f.n, let last = c.lastN, n == last + 1 {
            c.lastN = n; c.lastMs = f.ms; c.lastI = f.i; c.frames += 1
            cur = c
            continue
        }
        if let c = cur { segs.append(c) }
        cur = Segment(firstI: f.i, lastI: f.i, firstMs: f.ms, lastMs: f.ms, firstN: f.n, lastN: f.n,
                      frames: 1, outStart: f.t, sourceStart: nil, sourceEnd: nil)
    }
    if let c = cur { segs.append(c) }
    for k in segs.indices {
        segs[k].sourceStart = segs[k].firstN.map { Rational($0) / fps }
        segs[k].sourceEnd = segs[k].lastN.map { Rational($0 + 1) / fps }
    }
    var jumps: [Jump] = []
    for k in segs.indices.dropFirst() {
        let a = segs[k - 1], b = segs[k]
        let raw = Int64(b.firstMs) - Int64(a.lastMs)
        guard let la = a.lastN, let fb = b.firstN else {
            jumps.append(Jump(atFrame: b.firstI, outTime: b.outStart, pauseFrames: nil, pauseMs: nil,
                              rawMsJump: raw, windowSource: nil))
            continue
        }
        let skipped = fb - la - 1
        jumps.append(Jump(atFrame: b.firstI, outTime: b.outStart, pauseFrames: skipped,
                          pauseMs: Rational(skipped) / fps * 1000, rawMsJump: raw,
                          windowSource: (a.sourceEnd, b.sourceStart)))
    }
    return (segs, jumps)
}

/// Pairs each flash with the nearest beep onset (within 100 ms); offsets are beep minus flash.
func sync(_ v: VideoReport, _ a: AudioReport?, _ jumps: [Jump]) -> SyncReport {
    let frameS = v.frameMs / 1000
    let flashes = v.frames.filter(\.flash)
    let beeps = a?.beeps ?? []
    let rate = Double(a?.sampleRate ?? 1)
    // Times relative to the audio's sample 0, so each offset is an exact rational difference
    // plus the onset's sub-sample position: beep onset minus flash time.
    let audioStart = a?.start ?? Rational(0)
    let onsets = beeps.map { $0.beep.onsetSample / rate }           // sorted ascending
    let flashRel = flashes.map { (($0.t ?? Rational(0)) - audioStart).double }
    /// Index of the onset nearest `x` (the first of equals, like numpy's argmin).
    func nearest(_ x: Double) -> Int {
        var lo = 0, hi = onsets.count
        while lo < hi { let mid = (lo + hi) / 2; if onsets[mid] < x { lo = mid + 1 } else { hi = mid } }
        var best = min(lo, onsets.count - 1)
        if lo > 0 && abs(onsets[lo - 1] - x) <= abs(onsets[best] - x) { best = lo - 1 }
        return best
    }
    var pairs: [Pair] = [], unpairedFlashes: [UnpairedFlash] = []
    var used = Set<Int>()
    for (fi, f) in flashes.enumerated() {
        guard !beeps.isEmpty else {
            unpairedFlashes.append(UnpairedFlash(i: f.i, t: f.t, ms: f.ms, nearestBeepMs: nil))
            continue
        }
        let k = nearest(flashRel[fi])
        let off = onsets[k] - flashRel[fi]
        if abs(off) > Thresholds.pairWindowS {
            unpairedFlashes.append(UnpairedFlash(i: f.i, t: f.t, ms: f.ms, nearestBeepMs: pyRound(off * 1000, 3)))
            continue
        }
        used.insert(k)
        pairs.append(Pair(frame: f.i, sourceMs: f.ms, t: f.t ?? Rational(0), beepOnset: beeps[k].onset,
                          offsetMs: pyRound(off * 1000, 3)))
    }
    // a beep with no flash is only legitimate when a resume cut it: its onset then sits on the
    // segment boundary (the flash frame fell in the pause)
    let resumes = jumps.compactMap(\.outTime).map { ($0 - audioStart).double }
    var unpairedBeeps: [UnpairedBeep] = [], cut: [UnpairedBeep] = []
    for (k, b) in beeps.enumerated() where !used.contains(k) {
        let atResume = resumes.contains { abs(onsets[k] - $0) <= frameS + 0.002 }
        let entry = UnpairedBeep(onset: b.onset, reason: nil, durationMs: pyRound(b.beep.durationMs, 3),
                                 phaseOk: b.beep.phaseOk)
        if atResume && b.truncated {
            // cut short by the resume: its flash fell in the pause, and the flash before the
            // pause may well lie within reach (a pause that cut that flash's own beep)
            cut.append(entry)
            continue
        }
        if flashRel.contains(where: { abs(onsets[k] - $0) <= Thresholds.pairWindowS }) {
            unpairedBeeps.append(UnpairedBeep(onset: b.onset, reason: "second beep near one flash"))
            continue
        }
        if atResume { cut.append(entry) } else { unpairedBeeps.append(entry) }
    }
    let offs = pairs.map(\.offsetMs)
    var slope: Double? = nil
    if pairs.count >= 3 {
        let ts = pairs.map { $0.t.double }
        if ts.max()! - ts.min()! > 1.0 {
            // offset drift per second of output, in ppm: least-squares slope of offset over time
            let ys = offs.map { $0 / 1000 }
            let mt = ts.reduce(0, +) / Double(ts.count), my = ys.reduce(0, +) / Double(ys.count)
            var sxy = 0.0, sxx = 0.0
            for (t, y) in zip(ts, ys) { sxy += (t - mt) * (y - my); sxx += (t - mt) * (t - mt) }
            slope = pyRound(sxy / sxx * 1e6, 1)
        }
    }
    return SyncReport(pairs: pairs, maxAbsOffsetMs: offs.map { abs($0) }.max(),
                      meanOffsetMs: offs.isEmpty ? nil : offs.reduce(0, +) / Double(offs.count),
                      offsetDriftPpm: slope, unpairedFlashes: unpairedFlashes, unpairedBeeps: unpairedBeeps,
                      cutBeepsAtResume: cut)
}
