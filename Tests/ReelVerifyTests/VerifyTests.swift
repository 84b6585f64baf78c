import ReelCore
import Foundation
import XCTest

@testable import ReelVerify

/// Proof that `reelctl verify` can pass and can fail: a simulated pause/resume recording of the
/// contract's sources (Synth) must read exactly as built, and each broken variant must be caught
/// for the right reason. Then the same files through the Python oracle: the two must agree.
final class VerifyTests: XCTestCase {
    static let fps = Rational(15)
    static let pauses = [PauseWindow(pause: Rational(31, 15), resume: Rational(40, 15)),
                         PauseWindow(pause: Rational(66, 15), resume: Rational(76, 15))]

    override class func tearDown() {
        Synth.removeFiles()
        super.tearDown()
    }

    func report(_ name: String) throws -> Report {
        try analyze(path: try Synth.file(name))
    }

    func testGoodRecordingReadsExactly() throws {
        let r = try report("good")
        XCTAssertEqual(r.defects(), [], r.text())
        XCTAssertEqual(r.scheduleDefects(Self.pauses, tolPos: Rational(0), tolLen: Rational(0)), [])
        let sv = try XCTUnwrap(r.streams.video), sa = try XCTUnwrap(r.streams.audio)
        XCTAssertEqual([sv.codec, sv.profile, sv.pixFmt], ["h264", "High", "yuv420p"])
        XCTAssertEqual([sa.codec, sa.profile], ["aac", "LC"])
        let v = try XCTUnwrap(r.video)
        XCTAssertEqual(v.fps, Self.fps)
        XCTAssertEqual(v.frameCount, Synth.spans.map(\.count).reduce(0, +))
        XCTAssertEqual(v.ptsSteps, [v.frameTicks.roundedHalfEven])
        // every frame's timecode is the source frame that was put there
        let want = Synth.spans.flatMap { $0.map(Int64.init) }
        XCTAssertEqual(v.frames.map(\.n), want)
        XCTAssertEqual(v.frames.map(\.ms), want.map { UInt32($0 * 1000 / 15) })
        XCTAssertEqual(r.segments.map { [$0.firstMs, $0.lastMs] }, [[0, 2000], [2666, 4333], [5066, 6466]])
        XCTAssertEqual(r.jumps.map(\.pauseFrames), [9, 10])
        XCTAssertEqual(r.jumps.map(\.pauseMs), [Rational(600), Rational(2000, 3)])
        XCTAssertEqual(r.jumps.map(\.outTime), [Rational(31, 15), Rational(57, 15)])
        // flashes 1, 2, 3, 4, 6 survive; flash 5 fell in the second pause
        let sy = try XCTUnwrap(r.sync)
        XCTAssertEqual(sy.pairs.map(\.sourceMs), [1000, 2000, 3000, 4000, 6000])
        XCTAssertLessThan(try XCTUnwrap(sy.maxAbsOffsetMs), 0.1, "onset precision on a clean encode")
        XCTAssertTrue(sy.unpairedFlashes.isEmpty && sy.unpairedBeeps.isEmpty)
        // beep 5's tail starts exactly at the second resume: a cut, not a defect
        XCTAssertEqual(sy.cutBeepsAtResume.count, 1)
        XCTAssertEqual(sy.cutBeepsAtResume[0].onset, Rational(57, 15).double, accuracy: 0.001)
        // beep 2 is cut short by the first pause (66.7 ms kept) and still paired with flash 2
        let a = try XCTUnwrap(r.audio)
        let b2 = a.beeps.filter { abs($0.onset - 2.0) < 0.01 }
        XCTAssertEqual(b2.count, 1)
        XCTAssertTrue(b2[0].truncated)
        XCTAssertEqual(b2[0].beep.durationMs, 1000.0 / 15, accuracy: 1)
        XCTAssertLessThanOrEqual(((a.end - v.end!).magnitude * Rational(48000)).double, 1024)
        XCTAssertEqual(a.gapCount, 0)
        XCTAssertEqual(r.errors, [])
    }

    func testCatchesAudioShifted40ms() throws {
        let r = try report("audio_late_40ms")
        let offs = try XCTUnwrap(r.sync).pairs.map(\.offsetMs)
        XCTAssertFalse(offs.isEmpty)
        for o in offs { XCTAssertEqual(o, 40, accuracy: 1) }
        let d = r.defects()
        XCTAssertTrue(d.contains { $0.contains("5 flash/beep pairs off by more than 33.3 ms") }, "\(d)")
        XCTAssertEqual(r.scheduleDefects(Self.pauses, tolPos: Rational(0), tolLen: Rational(0)), [],
                       "video untouched: the schedule still reads exactly")
        // a looser tolerance accepts it
        XCTAssertEqual(r.defects(syncToleranceMs: 45), [])
    }

    func testCatchesFrameFromInsideAPause() throws {
        let r = try report("frame_from_pause")
        XCTAssertEqual(r.segments.count, 4)
        XCTAssertEqual(r.segments[1].frames, 1)
        XCTAssertEqual(r.segments[1].firstMs, 2333)
        XCTAssertEqual(r.jumps.map(\.pauseFrames), [4, 4, 10])
        let d = r.scheduleDefects(Self.pauses, tolPos: Rational(0), tolLen: Rational(0))
        XCTAssertTrue(d.contains { $0.contains("frames from inside it") && $0.contains("2333") }, "\(d)")
        XCTAssertTrue(d.contains { $0.contains("4 segments, want 3") }, "\(d)")
        // even with the loosest tolerance the e2e tests use (one frame + 50 ms)
        let loose = Rational(1, 15) + Rational(1, 20)
        XCTAssertTrue(r.scheduleDefects(Self.pauses, tolPos: loose, tolLen: loose).contains { $0.contains("frames from inside it") })
    }

    func testCatchesVideoPtsGapAtResume() throws {
        let r = try report("pts_gap_at_resume")
        let v = try XCTUnwrap(r.video)
        XCTAssertEqual(v.ptsSteps, [1024, 3 * 1024])
        XCTAssertEqual(v.ptsGridErrorCount, v.frameCount - 31)
        XCTAssertEqual(v.ptsGridErrors.first?.i, 31)
        XCTAssertEqual(v.ptsGridErrors.first?.diffTicks, 2048)
        let d = r.defects()
        XCTAssertTrue(d.contains { $0.contains("off the one-frame grid") }, "\(d)")
        // the strip still reads right: segments and jumps alone would not catch it
        XCTAssertEqual(r.scheduleDefects(Self.pauses, tolPos: Rational(0), tolLen: Rational(0)), [])
    }

    func testCatchesAudioGapAtResume() throws {
        let r = try report("audio_gap_at_resume")
        let d = r.defects()
        XCTAssertTrue(d.contains { $0.contains("flash/beep pairs off by more than") }, "\(d)")
        XCTAssertTrue(d.contains { $0.hasPrefix("audio ends at") }, "\(d)")
        let resume = try XCTUnwrap(r.jumps.first?.outTime)
        let late = try XCTUnwrap(r.sync).pairs.filter { resume < $0.t }.map(\.offsetMs)
        XCTAssertFalse(late.isEmpty)
        for o in late { XCTAssertEqual(o, 50, accuracy: 1) }
    }

    func testMeasuresTheDriftOfASkewedAudioClock() throws {
        let r = try report("audio_skew_300ppm")
        XCTAssertEqual(r.segments.count, 1)
        let sy = try XCTUnwrap(r.sync)
        XCTAssertEqual(sy.pairs.count, 9)
        for p in sy.pairs { XCTAssertEqual(p.offsetMs, p.t.double * 0.3, accuracy: 0.05, "flash at \(p.t.double) s") }
        XCTAssertEqual(try XCTUnwrap(sy.offsetDriftPpm), 300, accuracy: 5)
        XCTAssertEqual(r.defects(), [], "2.7 ms after 9 s is within half a frame")
        XCTAssertTrue(r.defects(syncToleranceMs: 2).contains { $0.contains("flash/beep pairs off by more than 2.0 ms") })
    }

    /// A beep running into the pause and the next one starting the resume make one tone with no
    /// dip (CI's VM run met it at 10 fps); each flash must still pair with its own beep.
    func testBeepsJoinedAcrossAResumeAreSplit() throws {
        let r = try report("beeps_joined_at_resume")
        XCTAssertEqual(r.defects(), [], r.text())
        let sy = try XCTUnwrap(r.sync), resume = try XCTUnwrap(r.jumps.first?.outTime).double
        XCTAssertEqual(sy.pairs.map(\.sourceMs), [1000, 2000, 3000, 4000, 5000, 6000])
        XCTAssertTrue(sy.unpairedFlashes.isEmpty && sy.unpairedBeeps.isEmpty, r.text())
        XCTAssertLessThan(try XCTUnwrap(sy.maxAbsOffsetMs), 1)
        let split = try XCTUnwrap(r.audio).beeps.filter(\.splitAtResume)
        XCTAssertEqual(split.count, 2)
        XCTAssertEqual(split[0].beep.durationMs, 1000.0 / 15, accuracy: 1)
        XCTAssertEqual(split[1].onset, resume, accuracy: 0.001)
    }

    /// CI's e2e run at 30 fps: the pause cut beep 2 after 66.7 ms, the resume came one frame after
    /// flash 3, and beep 3's last 66.7 ms joined beep 2's head. The tone's end minus 100 ms lies
    /// within a frame of the resume, yet its second part is a cut tail (the resume's first frame
    /// is no flash): split at the resume, filed as cut there, not as a second beep near flash 2.
    func testBeepCutByThePauseAndTheResumeSplitsAtTheResume() throws {
        let r = try report("beep_cut_by_pause_and_resume")
        XCTAssertEqual(r.defects(), [], r.text())
        let sy = try XCTUnwrap(r.sync), resume = try XCTUnwrap(r.jumps.first?.outTime).double
        XCTAssertEqual(sy.pairs.map(\.sourceMs), [1000, 2000, 4000, 5000])
        XCTAssertTrue(sy.unpairedFlashes.isEmpty && sy.unpairedBeeps.isEmpty, r.text())
        XCTAssertEqual(sy.cutBeepsAtResume.count, 1, r.text())
        let split = try XCTUnwrap(r.audio).beeps.filter(\.splitAtResume)
        XCTAssertEqual(split.count, 2)
        XCTAssertEqual(split[0].beep.durationMs, 2000.0 / 30, accuracy: 1)
        XCTAssertEqual(split[1].onset, resume, accuracy: 0.001)
    }

    // MARK: - the Python oracle on the same files

    struct OracleView {
        var segments: Int
        var jumpsMs: [Double?]
        var offsetsMs: [Double]
        var defects: Int
        var driftPpm: Double?
    }

    func oracle(_ path: String) throws -> OracleView {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/reel_verify.py").path
        let r = try Synth.run("/usr/bin/python3", [script, path, "--json"])
        XCTAssertTrue(r.status == 0 || r.status == 1, "oracle failed on \(path): \(r.stderr)")
        let j = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let segs = try XCTUnwrap(j["segments"] as? [[String: Any]])
        let jumps = try XCTUnwrap(j["jumps"] as? [[String: Any]])
        let sync = try XCTUnwrap(j["sync"] as? [String: Any])
        let pairs = try XCTUnwrap(sync["pairs"] as? [[String: Any]])
        return OracleView(segments: segs.count, jumpsMs: jumps.map { $0["pause_ms"] as? Double },
                          offsetsMs: pairs.compactMap { $0["offset_ms"] as? Double },
                          defects: (j["defects"] as? [Any])?.count ?? -1, driftPpm: sync["offset_drift_ppm"] as? Double)
    }

    func testAgreesWithThePythonOracle() throws {
        for name in Synth.variants.keys.sorted() {
            let path = try Synth.file(name)
            let mine = try analyze(path: path)
            let theirs = try oracle(path)
            XCTAssertEqual(mine.segments.count, theirs.segments, name)
            XCTAssertEqual(mine.jumps.count, theirs.jumpsMs.count, name)
            for (a, b) in zip(mine.jumps.map { $0.pauseMs?.double }, theirs.jumpsMs) {
                XCTAssertEqual(try XCTUnwrap(a, name), try XCTUnwrap(b, name), accuracy: 0.5, name)
            }
            let offs = try XCTUnwrap(mine.sync).pairs.map(\.offsetMs)
            XCTAssertEqual(offs.count, theirs.offsetsMs.count, name)
            for (a, b) in zip(offs, theirs.offsetsMs) { XCTAssertEqual(a, b, accuracy: 0.5, name) }
            XCTAssertEqual(mine.defects().count, theirs.defects, "\(name): \(mine.defects())")
            XCTAssertEqual(mine.sync?.offsetDriftPpm == nil, theirs.driftPpm == nil, name)
            if let a = mine.sync?.offsetDriftPpm, let b = theirs.driftPpm { XCTAssertEqual(a, b, accuracy: 1, name) }
        }
    }

    // MARK: - the CLI

    static func reelctl() throws -> String {
        let argv0 = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidates = [argv0.deletingLastPathComponent().appendingPathComponent("reelctl"),
                          Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("reelctl"),
                          root.appendingPathComponent(".build/debug/reelctl")]
        for url in candidates where FileManager.default.isExecutableFile(atPath: url.path) { return url.path }
        XCTFail("reelctl not found (looked at \(candidates.map(\.path))); build it with 'swift build --build-tests'")
        throw XCTSkip("no reelctl binary")
    }

    func testCLIExitStatusReportAndJSON() throws {
        let exe = try Self.reelctl()
        let good = try Synth.run(exe, ["verify", try Synth.file("good"), "--json"])
        XCTAssertEqual(good.status, 0, good.stderr)
        let j = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(good.stdout.utf8)) as? [String: Any])
        XCTAssertEqual((j["defects"] as? [Any])?.count, 0)
        XCTAssertEqual((j["segments"] as? [Any])?.count, 3)
        XCTAssertEqual(((j["sync"] as? [String: Any])?["pairs"] as? [Any])?.count, 5)

        let text = try Synth.run(exe, ["verify", try Synth.file("good")])
        XCTAssertEqual(text.status, 0)
        for line in ["segments: 3", "jump at frame 31 (out 2.0667 s): pause 600.000 ms (9 frames)",
                     "flash src 6000 ms at 4.7333 s: offset", "defects: none"] {
            XCTAssertTrue(text.stdout.contains(line), "missing '\(line)' in\n\(text.stdout)")
        }

        let bad = try Synth.run(exe, ["verify", try Synth.file("pts_gap_at_resume")])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stdout.contains("off the one-frame grid"), bad.stdout)

        let late = try Synth.run(exe, ["verify", try Synth.file("audio_late_40ms"), "--tolerance-ms", "45"])
        XCTAssertEqual(late.status, 0, late.stdout)

        // the pause schedule, as a user who knows when they paused gives it
        let schedule = ["--pause", "31/15:40/15", "--pause", "4.4:76/15"]
        let onSchedule = try Synth.run(exe, ["verify", try Synth.file("good")] + schedule)
        XCTAssertEqual(onSchedule.status, 0, onSchedule.stdout)
        let leak = try Synth.run(exe, ["verify", try Synth.file("frame_from_pause")] + schedule + ["--schedule-tolerance-ms", "116.7"])
        XCTAssertEqual(leak.status, 1)
        XCTAssertTrue(leak.stdout.contains("pause 0 [2.0667, 2.6667) s: 1 frames from inside it, source ms [2333]"), leak.stdout)
        let wrong = try Synth.run(exe, ["verify", try Synth.file("good"), "--pause", "2:2.6667"])
        XCTAssertEqual(wrong.status, 1)
        XCTAssertTrue(wrong.stdout.contains("3 segments, want 2"), wrong.stdout)
        let usage = try Synth.run(exe, ["verify", try Synth.file("good"), "--pause", "3:2"])
        XCTAssertEqual(usage.status, 2)
        XCTAssertTrue(usage.stderr.contains("invalid --pause '3:2'"), usage.stderr)

        let missing = try Synth.run(exe, ["verify", "/nonexistent/rec.mp4"])
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.stderr.contains("/nonexistent/rec.mp4") && missing.stderr.contains("No such file"), missing.stderr)
        XCTAssertThrowsError(try scan(path: "/nonexistent/rec.mp4")) {
            XCTAssertEqual(($0 as? VerifyError)?.message,
                           "cannot open /nonexistent/rec.mp4: No such file or directory (give the path of an MP4 recorded by reeld)")
        }

        let junk = NSTemporaryDirectory() + "reel-verify-junk-\(getpid()).mp4"
        try Data("not a recording\n".utf8).write(to: URL(fileURLWithPath: junk))
        defer { try? FileManager.default.removeItem(atPath: junk) }
        let notMedia = try Synth.run(exe, ["verify", junk])
        XCTAssertEqual(notMedia.status, 2)
        XCTAssertTrue(notMedia.stderr.contains(junk), notMedia.stderr)
    }
}

/// `reelctl verify --undone`: an undone take counts as pause and joins the pauses it touches.
final class UndoneScheduleTests: XCTestCase {
    func testUndoneTakesJoinThePausesTheyTouch() {
        func w(_ a: Int, _ b: Int) -> PauseWindow { PauseWindow(pause: Rational(Int64(a), 10), resume: Rational(Int64(b), 10)) }
        // pause 1.5-2.0, take 2.0-3.0 undone while recording, paused 3.0-3.5, take 3.5-4.8 undone
        // after its pause 4.8-5.4, and a later ordinary pause 7.0-7.5.
        let merged = PauseWindow.merging(pauses: [w(15, 20), w(30, 35), w(48, 54), w(70, 75)], undone: [w(20, 30), w(35, 48)])
        XCTAssertEqual(merged.map { [$0.pause, $0.resume] }, [[Rational(15, 10), Rational(54, 10)], [Rational(7), Rational(75, 10)]])
        // The first take undone: the file starts at the next resume (a window from 0).
        let first = PauseWindow.merging(pauses: [w(10, 12)], undone: [w(0, 10)])
        XCTAssertEqual(first.map { [$0.pause, $0.resume] }, [[Rational(0), Rational(12, 10)]])
        // Nothing undone: the pauses as given.
        XCTAssertEqual(PauseWindow.merging(pauses: [w(10, 12), w(20, 25)], undone: []).count, 2)
    }
}
