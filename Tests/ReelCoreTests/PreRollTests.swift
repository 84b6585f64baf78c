import XCTest
@testable import ReelCore

/// Pre-roll's decisions on a manual clock: the slots each pool gets, what the idle sources hold,
/// the instant a start is armed at (and what it gets when less is held), a start's own pre-roll,
/// the memory check and the standby check, the queue that takes the hand-over in one go.
final class PreRollTests: XCTestCase {
    let s = nanosPerSecond
    let ms: Nanos = 1_000_000

    func testNoPreRollKeepsThePoolsAndTheHalfPoolHoldAsBefore() {
        let p = PreRoll(0)
        XCTAssertEqual(p.videoSlots(fps: Rational(30)), 0)
        XCTAssertEqual(p.audioSlots(chunkFrames: 480, sampleRate: 48000), 0)
        XCTAssertEqual(p.holdCap(poolSlots: 30, extraSlots: 0), 15)
        XCTAssertEqual(p.holdNs, StandbyState.preroll)
        XCTAssertEqual(p.bytes(video: (460_800, Rational(30)), audio: AudioFormat(sampleRate: 48000, channels: 1)), 0)
        XCTAssertNil(p.memoryProblem(bytes: 1 << 40, limitMB: 1))
        XCTAssertNil(p.standbyProblem(standby: false, canBeWarm: false))
    }

    func testSlotsCoverThePreRollAndTheMarginRoundedUp() {
        // 1.5 s + 0.5 s margin at 30 fps: 60 frames, one more for the frame being captured.
        let p = PreRoll(1500 * ms)
        XCTAssertEqual(p.videoSlots(fps: Rational(30)), 61)
        XCTAssertEqual(p.videoSlots(fps: Rational(15)), 31)
        // 30000/1001: 2 s is 59.94 frames: 60, plus one.
        XCTAssertEqual(p.videoSlots(fps: Rational(30000, 1001)), 61)
        // Audio: 2.1 s (the audio hold margin is 0.1 s more) of 10 ms chunks: 210, plus one;
        // 44.1 kHz chunks of 441: the same.
        XCTAssertEqual(p.audioSlots(chunkFrames: 480, sampleRate: 48000), 211)
        XCTAssertEqual(p.audioSlots(chunkFrames: 441, sampleRate: 44100), 211)
        // A 5.3 ms ALSA period needs more of them.
        XCTAssertEqual(p.audioSlots(chunkFrames: 256, sampleRate: 48000), 395)
        // The idle hold is exactly those extra slots: the live ones stay free for capture.
        XCTAssertEqual(p.holdCap(poolSlots: 91, extraSlots: 61), 61)
    }

    func testMemoryOfTheDocumentedSizes() {
        // YUYV: 2 bytes a pixel. S = 3: 106 frames (3.5 s at 30 fps, + 1); S = 10: 316.
        let a48 = AudioFormat(sampleRate: 48000, channels: 2)
        // Audio: 3.6 s of 10 ms chunks, + 1: 361 slots of 481 stereo S16 frames.
        let audio3: Int64 = 361 * 481 * 4
        XCTAssertEqual(PreRoll(3 * s).audioSlots(chunkFrames: 480, sampleRate: 48000), 361)
        XCTAssertEqual(PreRoll(3 * s).bytes(video: (640 * 360 * 2, Rational(30)), audio: nil), 106 * 460_800)
        XCTAssertEqual(PreRoll(3 * s).bytes(video: (1280 * 720 * 2, Rational(30)), audio: a48), 106 * 1_843_200 + audio3)
        XCTAssertEqual(PreRoll(10 * s).bytes(video: (1280 * 720 * 2, Rational(30)), audio: nil), 316 * 1_843_200)
        // 3 s at 720p30 fits the default 256 MB; 10 s does not, and the error names both figures and the fix.
        XCTAssertNil(PreRoll(3 * s).memoryProblem(bytes: PreRoll(3 * s).bytes(video: (1_843_200, Rational(30)), audio: a48), limitMB: 256))
        let ten = PreRoll(10 * s)
        let problem = ten.memoryProblem(bytes: ten.bytes(video: (1_843_200, Rational(30)), audio: nil), limitMB: 256)
        XCTAssertEqual(problem, "pre_roll 10 s needs 583 MB of raw frames and audio at this size and frame rate, more than pre_roll_max_mb 256 MB (shorten pre_roll, lower the size or fps, or raise pre_roll_max_mb to at least 583)")
        // Exactly at the limit is allowed.
        XCTAssertNil(PreRoll(s).memoryProblem(bytes: 256_000_000, limitMB: 256))
        XCTAssertNotNil(PreRoll(s).memoryProblem(bytes: 256_000_001, limitMB: 256))
    }

    func testAPreRollNeedsStandbyAndWarmSources() {
        let p = PreRoll(1500 * ms)
        XCTAssertEqual(p.standbyProblem(standby: false, canBeWarm: true),
                       "pre_roll 1.5 s needs standby = true (the pre-roll is kept by the warm devices): turn standby on, or set pre_roll = 0")
        XCTAssertTrue(p.standbyProblem(standby: true, canBeWarm: false)!.contains("files and --unpaced cannot be"))
        XCTAssertNil(p.standbyProblem(standby: true, canBeWarm: true))
    }

    func testAStartWantsTheConfiguredPreRollOrLessNeverMore() {
        let p = PreRoll(1500 * ms)
        XCTAssertEqual(try p.forStart(nil).get(), 1500 * ms)
        XCTAssertEqual(try p.forStart(0).get(), 0)
        XCTAssertEqual(try p.forStart(1500 * ms).get(), 1500 * ms)
        guard case let .failure(r) = p.forStart(2 * s) else { return XCTFail("more than configured must be refused") }
        XCTAssertEqual(r.message, "bad \"preRollNs\": a pre-roll of 2 s is more than the configured pre_roll of 1.5 s, which is all standby keeps (ask for at most 1.5 s, or raise pre_roll in reeld.toml)")
        guard case .failure = PreRoll(0).forStart(1) else { return XCTFail("no pre-roll configured: any is refused") }
        guard case .failure = p.forStart(-1) else { return XCTFail("negative") }
    }

    func testArmedAtTheRequestLessThePreRollUnlessLessIsHeld() {
        let req = 100 * s
        // Held for long enough: exactly S before the request.
        XCTAssertEqual(PreRoll.start(requestedAt: req, want: 1500 * ms, heldFrom: 90 * s).at, req - 1500 * ms)
        XCTAssertEqual(PreRoll.start(requestedAt: req, want: 1500 * ms, heldFrom: 90 * s).got, 1500 * ms)
        // The sources opened (or the last recording ended) 0.4 s ago: from the earliest held item.
        let short = PreRoll.start(requestedAt: req, want: 1500 * ms, heldFrom: req - 400 * ms)
        XCTAssertEqual(short.at, req - 400 * ms)
        XCTAssertEqual(short.got, 400 * ms)
        // Nothing held: at the request, none got.
        XCTAssertEqual(PreRoll.start(requestedAt: req, want: 1500 * ms, heldFrom: nil).got, 0)
        // No pre-roll wanted: at the request, as without one, whatever is held.
        XCTAssertEqual(PreRoll.start(requestedAt: req, want: 0, heldFrom: 90 * s).at, req)
        // Held items newer than the request (a stamp after it): never after the request.
        XCTAssertEqual(PreRoll.start(requestedAt: req, want: s, heldFrom: req + 10 * ms).at, req)
    }

    func testAStartCountsFromWhenItsUserAskedWithinTheWindow() {
        let req = 100 * s
        // None said: the arrival.
        XCTAssertEqual(PreRoll.askedAt(requestedAt: req, at: nil), req)
        // A button's event 43 ms before the arrival: from the event.
        XCTAssertEqual(PreRoll.askedAt(requestedAt: req, at: req - 43 * ms), req - 43 * ms)
        XCTAssertEqual(PreRoll.askedAt(requestedAt: req, at: req - PreRoll.askedWindow), req - PreRoll.askedWindow)
        // Older than the window: that far back only; later than the arrival: the arrival.
        XCTAssertEqual(PreRoll.askedAt(requestedAt: req, at: req - 2 * s), req - PreRoll.askedWindow)
        XCTAssertEqual(PreRoll.askedAt(requestedAt: req, at: req + 5 * ms), req)
        // Any Int64 (a hostile client's) is safe: no arithmetic on it.
        XCTAssertEqual(PreRoll.askedAt(requestedAt: req, at: .min), req - PreRoll.askedWindow)
        XCTAssertEqual(PreRoll.askedAt(requestedAt: req, at: .max), req)
        // Inside what standby holds beyond the pre-roll, with room for arming late.
        XCTAssertLessThan(PreRoll.askedWindow, PreRoll.margin)
        // With a pre-roll: S before the asked instant.
        let asked = PreRoll.askedAt(requestedAt: req, at: req - 43 * ms)
        XCTAssertEqual(PreRoll.start(requestedAt: asked, want: 1500 * ms, heldFrom: 90 * s).at, req - 43 * ms - 1500 * ms)
    }

    func testHeldFromIsTheLatestOfTheStreamsEarliest() {
        XCTAssertEqual(PreRoll.heldFrom(video: .some(5 * s), audio: .some(4 * s)), 5 * s)
        XCTAssertEqual(PreRoll.heldFrom(video: .some(5 * s), audio: .some(6 * s)), 6 * s)
        XCTAssertEqual(PreRoll.heldFrom(video: .some(5 * s), audio: nil), 5 * s)  // no audio source
        XCTAssertNil(PreRoll.heldFrom(video: .some(5 * s), audio: .some(nil)))  // audio holds nothing yet
        XCTAssertNil(PreRoll.heldFrom(video: nil, audio: nil))
    }

    func testAvailableGrowsFromTheOpenUntilThePreRoll() {
        let p = PreRoll(3 * s)
        let opened = 50 * s
        XCTAssertEqual(p.available(now: opened + 1 * s, heldFrom: opened), 1 * s)
        XCTAssertEqual(p.available(now: opened + 10 * s, heldFrom: opened + 10 * s - 3500 * ms), 3 * s)
        XCTAssertEqual(p.available(now: opened, heldFrom: nil), 0)
    }

    func testQueueHoldsBothPoolsAtOnce() {
        XCTAssertEqual(PreRoll.queueCapacity(videoSlots: 30, audioSlots: 200), 1024)
        // 10 s at 30 fps and 10 ms chunks: 316 + 30 video, 1061 + 200 audio.
        XCTAssertEqual(PreRoll.queueCapacity(videoSlots: 346, audioSlots: 1261), 346 + 1261 + 64)
    }

    func testParseIsExactAndBounded() {
        XCTAssertEqual(PreRoll.parse("1.5"), 1_500_000_000)
        XCTAssertEqual(PreRoll.parse("0.001"), 1_000_000)
        XCTAssertEqual(PreRoll.parse("300"), 300 * s)
        for bad in ["", "-1", "1.2345", ".5", "2.", "300.001", "1e3", " 1"] { XCTAssertNil(PreRoll.parse(bad), bad) }
        XCTAssertEqual(PreRoll.seconds(1_500_000_000), "1.5")
        XCTAssertEqual(PreRoll.seconds(3 * s), "3")
        XCTAssertEqual(PreRoll.seconds(1_250_000_000), "1.25")
        XCTAssertEqual(PreRoll.seconds(1_005_000_000), "1.005")
    }
}
