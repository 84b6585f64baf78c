import Logging
import ReelControl
import ReelCore
@testable import ReelService
import ReelStorage
import XCTest

/// The recorder's lifecycle on a manual clock: starts let through or refused, each ending's report
/// (status, log and journal, counters, events, hand-off, the stop's answer), low space, standby
/// failures and shutdown; then every sequence of events the recorder's threads can produce, up
/// to a depth, against an oracle.
final class RecorderLifecycleTests: XCTestCase {
    typealias M = RecorderLifecycle
    let part = "/v/x.mp4.part", final = "/v/x.mp4"
    let facts = M.EndFacts(handedOff: nil, leftover: nil, segments: 2, recordedNs: 12_500_000_000, frames: 375, droppedFrames: 1)

    /// A lifecycle recording /v/x.mp4.part (min_free_mb 100).
    private func recording(warm: Bool = false) -> (M, M.Recording) {
        var m = M()
        XCTAssertNil(m.startAsked())
        let (r, _) = m.started(part: part, final: final, dir: "/v", minFreeBytes: 100_000_000, warm: warm, video: "test", audio: "none")
        return (m, r)
    }

    private func finishedSteps(_ p: String, by: FinishedBy = .stop) -> [M.Step] {
        [.finished(file: p),
         .log(.notice, "recording finished: \(p) (2 segments, 00:00:12.500, 375 frames, 1 dropped)",
              ["REEL_EVENT": "finished", "REEL_FILE": "\(p)", "REEL_PART": "\(part)", "REEL_DURATION_NS": "12500000000",
               "REEL_SEGMENTS": "2", "REEL_FRAMES": "375", "REEL_DROPPED_FRAMES": "1"]),
         .handOn(FinishedFile(path: p, by: by))]
    }

    // MARK: Start

    func testAStartIsLetThroughOnceAndTheNextRefusedNamingTheFile() {
        var m = M()
        XCTAssertNil(m.startAsked())
        XCTAssertEqual(m.phase, .starting)
        XCTAssertEqual(m.startAsked(), .wrongState("cannot start: another start is under way (try again in a moment)"))
        let (r, steps) = m.started(part: part, final: final, dir: "/v", minFreeBytes: 0, warm: true, video: "test 64x64", audio: "none")
        XCTAssertEqual(m.phase, .recording(r))
        XCTAssertTrue(r.warm)
        XCTAssertEqual(steps, [.log(.notice, "recording started: \(part) (video: test 64x64, audio: none)",
                                    ["REEL_EVENT": "started", "REEL_FILE": "\(final)", "REEL_PART": "\(part)", "REEL_SEGMENT": "0"])])
        XCTAssertEqual(m.startAsked(), .wrongState("cannot start: already recording \(part) (run 'reelctl stop' first)"))
        m.stopAccepted(id: r.id)
        XCTAssertEqual(m.startAsked(), .wrongState("cannot start: already recording \(part) (run 'reelctl stop' first)"))
    }

    func testAFailedStartIsReportedOnceARefusedOneNotAndASuccessClearsTheError() {
        var m = M()
        XCTAssertNil(m.startAsked())
        XCTAssertEqual(m.startRefused(.badRequest("bad \"label\"")), .badRequest("bad \"label\""))
        XCTAssertEqual(m.phase, .idle)
        XCTAssertNil(m.lastError, "a refused request reports nothing")

        XCTAssertNil(m.startAsked())
        let failed = m.startFailed("cannot start recording: only 5 MB free in /v", journal: nil)
        XCTAssertEqual(failed.answer, .failed("cannot start recording: only 5 MB free in /v"))
        XCTAssertEqual(failed.steps, [.log(.error, "cannot start recording: only 5 MB free in /v", nil),
                                      .error("cannot start recording: only 5 MB free in /v", .start)])
        XCTAssertEqual(m.lastError, "cannot start recording: only 5 MB free in /v")
        XCTAssertEqual(m.phase, .idle)

        XCTAssertNil(m.startAsked())
        let opened = m.startFailed("cannot start recording \(part): busy", journal: (final, part))
        XCTAssertEqual(opened.steps.first, .log(.error, "cannot start recording \(part): busy",
                                                ["REEL_EVENT": "failed", "REEL_FILE": "\(final)", "REEL_PART": "\(part)"]))

        XCTAssertNil(m.startAsked())
        _ = m.started(part: part, final: final, dir: "/v", minFreeBytes: 0, warm: false, video: "test", audio: "none")
        XCTAssertNil(m.lastError)
    }

    // MARK: Endings

    func testCompleteHandsTheFileOnAndAnswersTheStopWithIt() throws {
        var (m, r) = recording(warm: true)
        m.stopAccepted(id: r.id)
        XCTAssertEqual(m.phase, .stopping(r))
        let end = try XCTUnwrap(m.ended(id: r.id, .complete(file: final), facts))
        XCTAssertEqual(end.steps, finishedSteps(final))
        XCTAssertTrue(end.giveBack, "the standby's devices go back to it")
        XCTAssertEqual(m.lastFile, final)
        XCTAssertNil(m.lastError)
        XCTAssertEqual(M.stopAnswer(.complete(file: final), part: part), .ok(file: final))
        XCTAssertEqual(m.phase, .idle)
        XCTAssertFalse(m.isQuiet, "not before its report is done")
        m.reported()
        XCTAssertTrue(m.isQuiet)
    }

    func testTheSessionsOwnHandOffIsHandedOnNotAStop() throws {
        var (m, r) = recording()
        var f = facts
        f.handedOff = FinishedFile(path: "/v/x-2.mp4", by: .cap)
        let end = try XCTUnwrap(m.ended(id: r.id, .complete(file: "/v/x-2.mp4"), f))
        XCTAssertEqual(end.steps.last, .handOn(FinishedFile(path: "/v/x-2.mp4", by: .cap)))
        XCTAssertFalse(end.giveBack, "its own devices are closed")
    }

    func testASourceFailureIsReportedAsCutShortAndTheFileFinished() throws {
        var (m, r) = recording()
        let outcome = RecordingOutcome.cutShort(kept: .file(final), reason: .sourceFailed("/dev/video0: no such device"))
        var f = facts
        f.handedOff = FinishedFile(path: final, by: .sourceFailed)
        let end = try XCTUnwrap(m.ended(id: r.id, outcome, f))
        let message = "/dev/video0: no such device; the recording was finished early into \(final)"
        XCTAssertEqual(end.steps, [.log(.error, "recording \(final) finished early: /dev/video0: no such device",
                                        ["REEL_EVENT": "cut-short", "REEL_FILE": "\(final)", "REEL_PART": "\(part)"]),
                                   .error(message, .source)] + finishedSteps(final, by: .sourceFailed))
        XCTAssertEqual(m.lastFile, final)
        XCTAssertEqual(m.lastError, message)
        XCTAssertEqual(M.stopAnswer(outcome, part: part), .ok(file: final))
    }

    func testAFailedWriteThatKeptAFileIsCutShortAndTheStopGetsTheMessage() throws {
        var (m, r) = recording()
        let e = "no space left on device writing \(part): the disk is full; kept the first 12.5 s as \(final) (free space in /v)"
        let outcome = RecordingOutcome.cutShort(kept: .file(final), reason: .writeFailed(e))
        let end = try XCTUnwrap(m.ended(id: r.id, outcome, facts))
        XCTAssertEqual(end.steps, [.log(.error, "recording cut short: \(e)",
                                        ["REEL_EVENT": "cut-short", "REEL_FILE": "\(final)", "REEL_PART": "\(part)", "RECORDING": "\(final)"]),
                                   .error(e, .storage)] + finishedSteps(final))
        XCTAssertEqual(m.lastFile, final)
        XCTAssertEqual(m.lastError, e)
        XCTAssertEqual(M.stopAnswer(outcome, part: part), .error(.failed(e)))
    }

    func testAFailedWriteThatKeptNoFinishedFileNamesWhatIsLeft() throws {
        for (kept, leftover) in [(RecordingOutcome.Kept.nothing, nil), (.unrecovered(part), part)] as [(RecordingOutcome.Kept, String?)] {
            var (m, r) = recording()
            var f = facts
            f.leftover = leftover
            let outcome = RecordingOutcome.cutShort(kept: kept, reason: .writeFailed("E"))
            let end = try XCTUnwrap(m.ended(id: r.id, outcome, f))
            XCTAssertEqual(end.steps, [.log(.error, "recording cut short: E", ["REEL_EVENT": "failed", "REEL_FILE": "\(final)", "REEL_PART": "\(part)"]),
                                       .error("E", .storage)], "\(kept)")
            XCTAssertEqual(m.lastFile, leftover, "\(kept)")
            XCTAssertEqual(m.lastError, "E")
            XCTAssertEqual(M.stopAnswer(outcome, part: part), .error(.failed("E")))
        }
    }

    func testAFailureIsReportedWithThePartAndAFileFinishedAllTheSameIsHandedOn() throws {
        var (m, r) = recording()
        let end = try XCTUnwrap(m.ended(id: r.id, .failed("x264: out of memory"), facts))
        XCTAssertEqual(end.steps, [.log(.error, "recording ended with an error: x264: out of memory",
                                        ["REEL_EVENT": "failed", "REEL_FILE": "\(final)", "REEL_PART": "\(part)"]),
                                   .error("recording \(part) ended with an error: x264: out of memory", .recording)])
        XCTAssertEqual(m.lastError, "x264: out of memory")
        XCTAssertNil(m.lastFile)
        XCTAssertEqual(M.stopAnswer(.failed("x264: out of memory"), part: part),
                       .error(.failed("recording \(part) ended with an error: x264: out of memory")))

        // An earlier file stays lastFile when this one left nothing; one it left replaces it.
        var (m2, r2) = recording()
        _ = m2.ended(id: r2.id, .complete(file: "/v/a.mp4"), facts)
        XCTAssertNil(m2.startAsked())
        let r3 = m2.started(part: part, final: final, dir: "/v", minFreeBytes: 0, warm: false, video: "test", audio: "none").recording
        XCTAssertNotEqual(r2.id, r3.id)
        var f = facts
        f.handedOff = FinishedFile(path: final, by: .error)
        f.leftover = final
        let end3 = try XCTUnwrap(m2.ended(id: r3.id, .failed("aac: bad"), f))
        XCTAssertEqual(m2.lastFile, final)
        XCTAssertEqual(end3.steps.last, .handOn(FinishedFile(path: final, by: .error)))
    }

    /// A recording that failed after its file was finished all the same (an encoder error after
    /// the last fragment) hands that file on (REEL_FINISHED_BY=error): the `finished` event and
    /// journal line must name it, as they do every other file handed on. They did not: an events
    /// client or a `REEL_EVENT=finished` query never learnt of it.
    func testAFileFinishedDespiteAFailureIsAnnouncedFinished() throws {
        var (m, r) = recording()
        var f = facts
        f.handedOff = FinishedFile(path: final, by: .error)
        f.leftover = final
        let end = try XCTUnwrap(m.ended(id: r.id, .failed("x264: out of memory"), f))
        XCTAssertEqual(end.steps, [.log(.error, "recording ended with an error: x264: out of memory",
                                        ["REEL_EVENT": "failed", "REEL_FILE": "\(final)", "REEL_PART": "\(part)"]),
                                   .error("recording \(part) ended with an error: x264: out of memory", .recording)]
                       + finishedSteps(final, by: .error))
        XCTAssertEqual(m.lastFile, final)
        XCTAssertEqual(m.lastError, "x264: out of memory")
    }

    func testEveryTakeUndoneEndsWithNoFileAndAFinishedEventWithout() throws {
        var (m, r) = recording()
        let end = try XCTUnwrap(m.ended(id: r.id, .nothingKept, facts))
        XCTAssertEqual(end.steps, [.log(.notice, "recording stopped with every take undone: no file (\(final) was not written)", nil),
                                   .finished(file: nil)])
        XCTAssertNil(m.lastFile)
        XCTAssertNil(m.lastError)
        XCTAssertEqual(M.stopAnswer(.nothingKept, part: part), .ok(file: nil))
    }

    func testAnEndingIsTakenOnceWhoeverComesFirst() {
        var (m, r) = recording()
        XCTAssertNotNil(m.ended(id: r.id, .complete(file: final), facts), "the watcher thread's")
        XCTAssertNil(m.ended(id: r.id, .complete(file: final), facts), "the stop's, after it")
        XCTAssertEqual(m.reporting, 1)
        XCTAssertNil(m.ended(id: r.id + 1, .complete(file: final), facts), "not the recording under way")
    }

    func testAStopThatTimesOutNamesTheFileAndTheTimeWaited() {
        let t0: Nanos = 3_600 * nanosPerSecond
        XCTAssertEqual(M.stopTimedOut(part: part, asked: t0, deadline: t0 + 120 * nanosPerSecond + 999_999_999),
                       .failed("stopping \(part) did not finish within 120 s; the daemon log has details"))
        XCTAssertEqual(M.stopTimedOut(part: part, asked: t0, deadline: t0 - 1).message,
                       "stopping \(part) did not finish within 0 s; the daemon log has details")
        var m = M()
        XCTAssertEqual(m.stopAsked(), .failure(.wrongState("cannot stop: not recording (state is idle)")))
        let (m2, r) = recording()
        m = m2
        XCTAssertEqual(m.stopAsked(), .success(r))
    }

    // MARK: Free space, standby, shutdown

    func testLowSpaceStopsTheRecordingOnceItIsBelowMinFreeInItsDirectory() {
        var (m, r) = recording()
        XCTAssertEqual(m.freeSpace(100_000_000, in: "/v", stopping: false, of: r.id), [], "at min_free_mb: goes on")
        XCTAssertEqual(m.freeSpace(nil, in: "/v", stopping: false, of: r.id), [], "unknown: goes on")
        XCTAssertEqual(m.freeSpace(5, in: "/w", stopping: false, of: r.id), [], "another directory (a SIGHUP's)")
        XCTAssertEqual(m.freeSpace(5, in: "/v", stopping: true, of: r.id), [], "stopping already")
        XCTAssertEqual(m.freeSpace(5, in: "/v", stopping: false, of: r.id + 1), [], "another recording")
        let message = "free space in /v fell to 99 MB, below min_free_mb 100: finishing \(part)"
        XCTAssertEqual(m.freeSpace(99_999_999, in: "/v", stopping: false, of: r.id),
                       [.log(.error, message, nil), .error(message, .lowSpace), .stop])
        XCTAssertEqual(m.lastError, message)
        m.stopAccepted(id: r.id)
        XCTAssertEqual(m.freeSpace(5, in: "/v", stopping: false, of: r.id), [], "its stop was taken")
        var idle = M()
        XCTAssertEqual(idle.freeSpace(5, in: "/v", stopping: false, of: 0), [])
    }

    func testEachNewStandbyFailureIsReportedOnce() {
        var m = M()
        XCTAssertEqual(m.standby(failure: nil), [])
        let a = "standby: cannot open /dev/video0: no such device; reeld keeps retrying (check the device)"
        XCTAssertEqual(m.standby(failure: "cannot open /dev/video0: no such device"), [.error(a, .source)])
        XCTAssertEqual(m.lastError, a)
        XCTAssertEqual(m.standby(failure: "cannot open /dev/video0: no such device"), [], "the same failure, retried")
        XCTAssertEqual(m.standby(failure: "cannot open /dev/video0: busy").count, 1, "another one")
        XCTAssertEqual(m.standby(failure: nil), [])
        XCTAssertEqual(m.standby(failure: "cannot open /dev/video0: busy").count, 1, "again after it was warm")
    }

    /// A start under way when shutdown begins makes a recording: shutdown must stop it (its stop
    /// waits for the start), and is not over until it ended. It said nothing to stop: shutdown
    /// returned, the start went on, and reeld's exit cut its recording into a .part.
    func testShutdownWhileAStartIsUnderWayStopsTheRecordingItMakes() {
        var m = M()
        XCTAssertNil(m.startAsked())
        XCTAssertTrue(m.shutdown())
        XCTAssertFalse(m.isQuiet)
        let r = m.started(part: part, final: final, dir: "/v", minFreeBytes: 0, warm: false, video: "test", audio: "none").recording
        XCTAssertEqual(m.stopAsked(), .success(r))
        XCTAssertNotNil(m.ended(id: r.id, .complete(file: final), facts))
        m.reported()
        XCTAssertTrue(m.isQuiet)
    }

    func testShutdownRefusesEveryStartAndStopsTheRecording() {
        var idle = M()
        XCTAssertFalse(idle.shutdown())
        XCTAssertTrue(idle.isQuiet)
        XCTAssertEqual(idle.startAsked(), .wrongState("cannot start: reeld is shutting down (start it again, e.g. 'systemctl start reeld')"))
        var (m, r) = recording()
        XCTAssertTrue(m.shutdown())
        XCTAssertEqual(m.startAsked()?.message.contains("shutting down"), true)
        XCTAssertFalse(m.isQuiet)
        _ = m.ended(id: r.id, .complete(file: final), facts)
        XCTAssertFalse(m.isQuiet, "its on_finish is not started yet")
        m.reported()
        XCTAssertTrue(m.isQuiet)
    }
}
