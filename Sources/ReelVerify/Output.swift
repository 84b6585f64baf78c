import ReelCore
import Foundation

// MARK: - defects: the oracle's `defects()`, same rules, same thresholds

extension Report {
    /// Violations of what holds for *every* correct recording of the test sources.
    /// `syncToleranceMs` defaults to half a frame (500/fps ms).
    public func defects(syncToleranceMs: Double? = nil) -> [String] {
        var out: [String] = []
        if !errors.isEmpty { out.append("decode errors: \(pyList(errors.prefix(3).map { "'\($0)'" }))") }
        guard let sv = streams.video, let v = video else { return out + ["no video stream"] }
        if streams.audio == nil || audio == nil { out.append("no audio stream") }
        if sv.codec != "h264" || sv.profile != "High" {
            out.append("video is \(sv.codec ?? "None") \(sv.profile ?? "None"), want h264 High")
        }
        if sv.pixFmt != "yuv420p" { out.append("pix_fmt \(sv.pixFmt ?? "None"), want yuv420p") }
        if let sa = streams.audio, sa.codec != "aac" || sa.profile != "LC" {
            out.append("audio is \(sa.codec ?? "None") \(sa.profile ?? "None"), want aac LC")
        }
        if v.frameCount != v.packetCount {
            out.append("decoded \(v.frameCount) frames but the file has \(v.packetCount) video packets")
        }
        if v.ptsGridErrorCount > 0 {
            out.append("\(v.ptsGridErrorCount) video pts off the one-frame grid (steps seen \(v.ptsSteps); first "
                       + pyList(v.ptsGridErrors.prefix(3).map { "{i: \($0.i), pts: \($0.pts), expected: \($0.expected), diff_ticks: \($0.diffTicks)}" }) + ")")
        }
        if let m = v.fpsFromPts, m != v.fps {
            out.append("r_frame_rate \(v.fps.ratioText) disagrees with the pts steps (\(m))")
        }
        if !v.invalidTimecodes.isEmpty {
            out.append("unreadable or foreign timecodes at frames \(Array(v.invalidTimecodes.prefix(10)))")
        }
        if !v.flashMismatches.isEmpty {
            out.append("flash where the timecode says none (or the reverse) at frames \(Array(v.flashMismatches.prefix(10)))")
        }
        if let s0 = segments.first, s0.firstMs != 0 {
            out.append("first frame's source time is \(s0.firstMs) ms, want 0")
        }
        for j in jumps {
            if j.pauseFrames == nil || j.pauseFrames! < 0 {
                out.append("source time goes backwards or is unreadable at frame \(j.atFrame) (raw jump \(j.rawMsJump) ms)")
            } else if j.pauseFrames == 0 {
                out.append("source frame repeated at frame \(j.atFrame)")
            }
        }
        if let a = audio {
            if a.gapCount > 0 {
                out.append("\(a.gapCount) gaps/overlaps in audio frame timestamps: "
                           + pyList(a.gaps.prefix(3).map { "{pts: \($0.pts), expected: \(fmt($0.expected.double, 1)), gap_ms: \(fmt($0.gapMs, 3))}" }))
            }
            // Compare where each stream *ends* on the output timeline: FFmpeg 5.1 reads a
            // fragmented MP4's edit list as a time offset and decodes the AAC priming before t=0.
            if let vEnd = v.end {
                let diff = ((a.end - vEnd).magnitude * Rational(Int64(a.sampleRate))).double
                if diff > Double(Thresholds.aacFrame) {
                    // A file cut short (crash, full disk) keeps audio up to x264's delay past its video.
                    let why = a.end > vEnd ? "; a file cut short by a crash or a full disk ends so" : ""
                    out.append("audio ends at \(fmt(a.end.double, 4)) s, video at \(fmt(vEnd.double, 4)) s "
                               + "(\(fmt(diff, 0)) samples apart, more than one AAC frame\(why))")
                }
            }
            let vStart = v.start ?? Rational(0)
            if ((a.start - vStart).magnitude * 1000).double > v.frameMs {
                out.append("audio starts at \(fmt(a.start.double, 4)) s, video at \(fmt(vStart.double, 4)) s")
            }
            if a.maxChannelDifference > 64 {
                out.append("channels differ (max |ch - ch0| = \(a.maxChannelDifference))")
            }
        }
        if let sy = sync {
            let tol = syncToleranceMs ?? v.frameMs / 2
            let bad = sy.pairs.filter { abs($0.offsetMs) > tol }
            if !bad.isEmpty {
                out.append("\(bad.count) flash/beep pairs off by more than \(fmt(tol, 1)) ms (max \(optNum(sy.maxAbsOffsetMs)) ms; first "
                           + pyList(bad.prefix(3).map { "{frame: \($0.frame), source_ms: \($0.sourceMs), offset_ms: \(num($0.offsetMs))}" }) + ")")
            }
            if !sy.unpairedFlashes.isEmpty {
                out.append("flashes without a beep: " + pyList(sy.unpairedFlashes.prefix(5).map {
                    "{i: \($0.i), t: \(optNum($0.t?.double)), ms: \($0.ms)"
                        + ($0.nearestBeepMs.map { ", nearest_beep_ms: \(num($0))" } ?? "") + "}" }))
            }
            if !sy.unpairedBeeps.isEmpty {
                out.append("beeps without a flash (not at a resume): " + pyList(sy.unpairedBeeps.prefix(5).map {
                    "{onset: \(fmt($0.onset, 5))" + ($0.reason.map { ", reason: '\($0)'" } ?? "")
                        + ($0.durationMs.map { ", duration_ms: \(num($0))" } ?? "") + "}" }))
            }
        }
        return out
    }
}

func pyList(_ items: [String]) -> String { "[" + items.joined(separator: ", ") + "]" }
func fmt(_ x: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", x) }
func num(_ x: Double) -> String { x == x.rounded() && abs(x) < 1e15 ? "\(Int64(x)).0" : "\(x)" }
func optNum(_ x: Double?) -> String { x.map(num) ?? "None" }
func optFmt(_ x: Double?, _ digits: Int) -> String { x.map { fmt($0, digits) } ?? "None" }

// MARK: - The readable report

extension Report {
    /// The readable report; `extraDefects` (for example schedule checks) join the final list.
    public func text(syncToleranceMs: Double? = nil, extraDefects: [String] = []) -> String {
        var L = ["file: \(file)"]
        if let s = streams.video {
            L.append("video: \(s.codec ?? "?") \(s.profile ?? "?") \(s.pixFmt ?? "?") \(s.width)x\(s.height) "
                     + "tb=\(s.timeBase.ratioText) start=\(optNum(s.startTime?.double)) r_frame_rate=\(s.rFrameRate?.ratioText ?? "?")")
        } else {
            L.append("video: none")
        }
        if let s = streams.audio {
            L.append("audio: \(s.codec ?? "?") \(s.profile ?? "?") \(s.sampleRate) Hz x\(s.channels) "
                     + "tb=\(s.timeBase.ratioText) start=\(optNum(s.startTime?.double))")
        } else {
            L.append("audio: none")
        }
        if let v = video {
            L.append("frames: \(v.frameCount) at \(v.fps.ratioText) fps (frame \(fmt(v.frameMs, 3)) ms, \(num(v.frameTicks.double)) ticks); "
                     + "pts \(v.firstPts.map(String.init) ?? "None")..\(v.lastPts.map(String.init) ?? "None") steps \(v.ptsSteps); "
                     + "off-grid \(v.ptsGridErrorCount)")
            for g in v.ptsGridErrors.prefix(5) {
                L.append("  pts off grid at frame \(g.i): \(g.pts), want \(g.expected) (\(g.diffTicks > 0 ? "+" : "")\(g.diffTicks) ticks)")
            }
            L.append("video: \(optFmt(v.start?.double, 6)) .. \(optFmt(v.end?.double, 6)) s (duration \(optFmt(v.duration?.double, 6)) s); "
                     + "flashes \(v.flashCount); strip margin \(num(v.stripMarginMin))")
        }
        L.append("segments: \(segments.count)")
        for (k, s) in segments.enumerated() {
            L.append("  #\(k): frames \(s.firstI)..\(s.lastI) (\(s.frames)), source ms \(s.firstMs)..\(s.lastMs), "
                     + "out \(optFmt(s.outStart?.double, 4)) s")
        }
        for j in jumps {
            L.append("  jump at frame \(j.atFrame) (out \(optFmt(j.outTime?.double, 4)) s): pause "
                     + (j.pauseMs.map { fmt($0.double, 3) + " ms" } ?? "unreadable (raw jump \(j.rawMsJump) ms)")
                     + (j.pauseFrames.map { " (\($0) frames)" } ?? ""))
        }
        if let a = audio {
            L.append("audio: \(a.samples) samples = \(fmt(a.duration.double, 6)) s from \(fmt(a.start.double, 6)) s; "
                     + "frame gaps \(a.gapCount); beeps \(a.beeps.count)")
            for g in a.gaps.prefix(5) {
                L.append("  audio gap at pts \(g.pts): \(g.gapMs > 0 ? "+" : "")\(fmt(g.gapMs, 3)) ms")
            }
            for b in a.beeps {
                L.append("  beep at \(fmt(b.onset, 5)) s, \(fmt(b.beep.durationMs, 2)) ms, amp \(fmt(b.beep.amplitude, 4)), "
                         + "phase_ok=\(b.beep.phaseOk ? "True" : "False")")
            }
        }
        if let sy = sync {
            L.append("sync: max |offset| \(optNum(sy.maxAbsOffsetMs)) ms over \(sy.pairs.count) pairs; "
                     + "drift \(optNum(sy.offsetDriftPpm)) ppm")
            for p in sy.pairs {
                L.append("  flash src \(p.sourceMs) ms at \(fmt(p.t.double, 4)) s: offset \(String(format: "%+.3f", p.offsetMs)) ms")
            }
            for f in sy.unpairedFlashes {
                L.append("  flash without a beep: frame \(f.i), src \(f.ms) ms at \(optFmt(f.t?.double, 4)) s"
                         + (f.nearestBeepMs.map { " (nearest beep \(num($0)) ms away)" } ?? ""))
            }
            for b in sy.unpairedBeeps {
                L.append("  beep without a flash at \(fmt(b.onset, 5)) s" + (b.reason.map { " (\($0))" } ?? ""))
            }
            for b in sy.cutBeepsAtResume {
                L.append("  beep cut by a resume at \(fmt(b.onset, 5)) s (\(optFmt(b.durationMs, 2)) ms kept)")
            }
        }
        L.append("errors: " + (errors.isEmpty ? "none" : pyList(errors.map { "'\($0)'" })))
        let d = defects(syncToleranceMs: syncToleranceMs) + extraDefects
        L.append("defects: " + (d.isEmpty ? "none" : ""))
        L.append(contentsOf: d.map { "  - \($0)" })
        return L.joined(separator: "\n")
    }
}

// MARK: - JSON, with the oracle's keys

extension Report {
    public func json(syncToleranceMs: Double? = nil, extraDefects: [String] = []) -> JSON {
        func secs(_ f: Rational?) -> JSON { JSON.opt(f?.double) }
        var streamsJ: [(String, JSON)] = [("format", .opt(streams.format))]
        if let s = streams.video {
            streamsJ.append(("video", .object([
                ("index", .int(Int64(s.index))), ("codec", .opt(s.codec)), ("profile", .opt(s.profile)),
                ("pix_fmt", .opt(s.pixFmt)), ("width", .int(Int64(s.width))), ("height", .int(Int64(s.height))),
                ("time_base", .string(s.timeBase.ratioText)), ("start_pts", .opt(s.startPts)),
                ("start_time", secs(s.startTime)), ("r_frame_rate", .opt(s.rFrameRate)),
                ("avg_frame_rate", .opt(s.avgFrameRate)), ("nb_frames", .opt(s.nbFrames)),
            ])))
        } else { streamsJ.append(("video", .null)) }
        if let s = streams.audio {
            streamsJ.append(("audio", .object([
                ("index", .int(Int64(s.index))), ("codec", .opt(s.codec)), ("profile", .opt(s.profile)),
                ("sample_rate", .int(Int64(s.sampleRate))), ("channels", .int(Int64(s.channels))),
                ("time_base", .string(s.timeBase.ratioText)), ("start_pts", .opt(s.startPts)),
                ("start_time", secs(s.startTime)),
            ])))
        } else { streamsJ.append(("audio", .null)) }

        var videoJ = JSON.null
        if let v = video {
            videoJ = .object([
                ("width", .int(Int64(v.width))), ("height", .int(Int64(v.height))),
                ("fps", .string(v.fps.ratioText)), ("fps_from_pts", .opt(v.fpsFromPts)),
                ("frame_ms", .double(v.frameMs)), ("time_base", .string(v.timeBase.ratioText)),
                ("frame_ticks", .double(v.frameTicks.double)),
                ("frame_count", .int(Int64(v.frameCount))), ("packet_count", .int(Int64(v.packetCount))),
                ("first_pts", .opt(v.firstPts)), ("last_pts", .opt(v.lastPts)),
                ("pts_steps", .ints(v.ptsSteps)),
                ("pts_grid_errors", .array(v.ptsGridErrors.map { .object([
                    ("i", .int(Int64($0.i))), ("pts", .int($0.pts)), ("expected", .int($0.expected)),
                    ("diff_ticks", .int($0.diffTicks))]) })),
                ("pts_grid_error_count", .int(Int64(v.ptsGridErrorCount))),
                ("start", secs(v.start)), ("end", secs(v.end)), ("duration", secs(v.duration)),
                ("strip_margin_min", .double(v.stripMarginMin)),
                ("invalid_timecodes", .ints(v.invalidTimecodes)),
                ("flash_count", .int(Int64(v.flashCount))),
                ("flash_mismatches", .ints(v.flashMismatches)),
                ("frames", .array(v.frames.map { f in .object([
                    ("i", .int(Int64(f.i))), ("pts", .opt(f.pts)), ("t", secs(f.t)),
                    ("ms", .int(Int64(f.ms))), ("n", .opt(f.n)), ("flash", .bool(f.flash)),
                    ("luma_below", .double(f.lumaBelow))]) })),
            ])
        }
        let segJ = JSON.array(segments.map { s in .object([
            ("first_i", .int(Int64(s.firstI))), ("last_i", .int(Int64(s.lastI))),
            ("first_ms", .int(Int64(s.firstMs))), ("last_ms", .int(Int64(s.lastMs))),
            ("first_n", .opt(s.firstN)), ("last_n", .opt(s.lastN)), ("frames", .int(Int64(s.frames))),
            ("out_start", secs(s.outStart)), ("source_start", secs(s.sourceStart)), ("source_end", secs(s.sourceEnd)),
        ]) })
        let jumpJ = JSON.array(jumps.map { j in
            var o: [(String, JSON)] = [
                ("at_frame", .int(Int64(j.atFrame))), ("out_time", secs(j.outTime)),
                ("pause_frames", .opt(j.pauseFrames)), ("pause_ms", .opt(j.pauseMs?.double)),
                ("raw_ms_jump", .int(j.rawMsJump))]
            if let w = j.windowSource { o.append(("window_source", .array([secs(w.0), secs(w.1)]))) }
            return .object(o)
        })
        var audioJ = JSON.null
        if let a = audio {
            audioJ = .object([
                ("sample_rate", .int(Int64(a.sampleRate))), ("channels", .int(Int64(a.channels))),
                ("samples", .int(a.samples)), ("duration", .double(a.duration.double)),
                ("start", .double(a.start.double)), ("stream_start_time", secs(a.streamStartTime)),
                ("end", .double(a.end.double)),
                ("frame_pts_gaps", .array(a.gaps.map { .object([
                    ("pts", .int($0.pts)), ("expected", .double($0.expected.double)), ("gap_ms", .double($0.gapMs))]) })),
                ("frame_pts_gap_count", .int(Int64(a.gapCount))),
                ("decoded_frames", .int(Int64(a.decodedFrames))),
                ("max_channel_difference", .int(Int64(a.maxChannelDifference))),
                ("beeps", .array(a.beeps.map { b in .object([
                    ("onset_sample", .double(pyRound(b.beep.onsetSample, 2))),
                    ("onset_env_sample", .double(pyRound(b.beep.onsetEnvSample, 2))),
                    ("onset_phase_sample", .opt(b.beep.onsetPhaseSample.map { pyRound($0, 2) })),
                    ("phase_ok", .bool(b.beep.phaseOk)), ("end_sample", .double(b.beep.endSample)),
                    ("duration_ms", .double(pyRound(b.beep.durationMs, 3))),
                    ("amplitude", .double(pyRound(b.beep.amplitude, 4))),
                    ("onset", .double(b.onset)), ("end", .double(b.end)), ("truncated", .bool(b.truncated)),
                    ("split_at_resume", .bool(b.splitAtResume)),
                ]) })),
            ])
        }
        var syncJ = JSON.null
        if let sy = sync {
            func beepJ(_ b: UnpairedBeep) -> JSON {
                var o: [(String, JSON)] = [("onset", .double(b.onset))]
                if let r = b.reason { o.append(("reason", .string(r))) }
                if let d = b.durationMs { o.append(("duration_ms", .double(d))) }
                if let p = b.phaseOk { o.append(("phase_ok", .bool(p))) }
                return .object(o)
            }
            syncJ = .object([
                ("pairs", .array(sy.pairs.map { p in .object([
                    ("frame", .int(Int64(p.frame))), ("source_ms", .int(Int64(p.sourceMs))), ("t", .double(p.t.double)),
                    ("beep_onset", .double(p.beepOnset)), ("offset_ms", .double(p.offsetMs))]) })),
                ("max_abs_offset_ms", .opt(sy.maxAbsOffsetMs)), ("mean_offset_ms", .opt(sy.meanOffsetMs)),
                ("offset_drift_ppm", .opt(sy.offsetDriftPpm)),
                ("unpaired_flashes", .array(sy.unpairedFlashes.map { f in
                    var o: [(String, JSON)] = [("i", .int(Int64(f.i))), ("t", secs(f.t)), ("ms", .int(Int64(f.ms)))]
                    if let n = f.nearestBeepMs { o.append(("nearest_beep_ms", .double(n))) }
                    return .object(o) })),
                ("unpaired_beeps", .array(sy.unpairedBeeps.map(beepJ))),
                ("cut_beeps_at_resume", .array(sy.cutBeepsAtResume.map(beepJ))),
            ])
        }
        return .object([
            ("file", .string(file)), ("streams", .object(streamsJ)), ("video", videoJ),
            ("segments", segJ), ("jumps", jumpJ), ("audio", audioJ), ("sync", syncJ),
            ("errors", .array(errors.map { .string($0) })),
            ("defects", .array((defects(syncToleranceMs: syncToleranceMs) + extraDefects).map { .string($0) })),
        ])
    }
}

// MARK: - schedule checks: the oracle's `schedule_defects()`

/// A pause window in source time: [pause, resume), exact.
public struct PauseWindow: Sendable {
    public var pause: Rational, resume: Rational
    public init(pause: Rational, resume: Rational) { self.pause = pause; self.resume = resume }

    /// The pauses the file must show once `undone` takes (source spans from a take's start to its
    /// pause or undo) are removed: an undone take counts as pause, so it joins the pauses it
    /// touches or overlaps (`reelctl undo`: the take's span, then the pause up to the next resume,
    /// is one cut). Sorted by start.
    public static func merging(pauses: [PauseWindow], undone: [PauseWindow]) -> [PauseWindow] {
        var out: [PauseWindow] = []
        for w in (pauses + undone).sorted(by: { $0.pause < $1.pause }) {
            if let last = out.last, !(last.resume < w.pause) {
                if last.resume < w.resume { out[out.count - 1].resume = w.resume }
            } else {
                out.append(w)
            }
        }
        return out
    }
}

extension Report {
    /// Checks against a known schedule. A correct recording has pauses.count + 1 segments; each
    /// jump equals resume - pause within `tolLen`; each segment ends at its pause and the next
    /// starts at its resume within `tolPos`; no frame starts inside [pause + tolPos, resume - tolPos).
    /// With `stop`, the last segment ends at stop within `tolStop`. Tolerances in seconds.
    public func scheduleDefects(_ pauses: [PauseWindow], tolPos: Rational, tolLen: Rational,
                                stop: Rational? = nil, tolStop: Rational = Rational(0)) -> [String] {
        guard let v = video else { return ["no video"] }
        var out: [String] = []
        let segs = segments
        if segs.count != pauses.count + 1 {
            out.append("\(segs.count) segments, want \(pauses.count + 1) (source ms ranges "
                       + pyList(segs.map { "(\($0.firstMs), \($0.lastMs))" }) + ")")
        }
        for (k, (p, j)) in zip(pauses, jumps).enumerated() {
            let want = p.resume - p.pause
            if j.pauseMs == nil || tolLen < (j.pauseMs! / Rational(1000) - want).magnitude {
                out.append("pause \(k): jump \(j.pauseMs.map { fmt($0.double, 3) } ?? "None") ms, measured pause "
                           + "\(fmt(want.double * 1000, 1)) ms (tolerance \(fmt(tolLen.double * 1000, 1)) ms)")
            }
        }
        for (k, p) in pauses.enumerated() {
            let inside = v.frames.filter { f in
                guard let n = f.n else { return false }
                let t = Rational(n) / v.fps
                return !(t < p.pause + tolPos) && t < p.resume - tolPos
            }
            if !inside.isEmpty {
                out.append("pause \(k) [\(fmt(p.pause.double, 4)), \(fmt(p.resume.double, 4))) s: \(inside.count) frames from inside it, "
                           + "source ms \(Array(inside.map(\.ms).prefix(8))) at output frames \(Array(inside.map(\.i).prefix(8)))")
            }
            if k + 1 < segs.count {
                let a = segs[k], b = segs[k + 1]
                if a.sourceEnd == nil || tolPos < (a.sourceEnd! - p.pause).magnitude {
                    out.append("segment \(k) ends at source \(optNum(a.sourceEnd?.double)) s, paused at \(fmt(p.pause.double, 4)) s "
                               + "(tolerance \(fmt(tolPos.double * 1000, 1)) ms)")
                }
                if b.sourceStart == nil || tolPos < (b.sourceStart! - p.resume).magnitude {
                    out.append("segment \(k + 1) starts at source \(optNum(b.sourceStart?.double)) s, resumed at \(fmt(p.resume.double, 4)) s "
                               + "(tolerance \(fmt(tolPos.double * 1000, 1)) ms)")
                }
            }
        }
        if let stop, let last = segs.last {
            if last.sourceEnd == nil || tolStop < (last.sourceEnd! - stop).magnitude {
                out.append("last segment ends at source \(optNum(last.sourceEnd?.double)) s, stopped at \(fmt(stop.double, 4)) s "
                           + "(tolerance \(fmt(tolStop.double * 1000, 1)) ms)")
            }
        }
        return out
    }
}
