import ReelControl
import ReelCore
import XCTest

@testable import ReelButton

/// The decisions of reel-button on a manual clock: instants are plain ns, as the input events'.
final class ButtonMachineTests: XCTestCase {
    static let ms: Nanos = 1_000_000
    let space = 57, btn0 = 256, bksp = 14, esc = 1

    func machine(debounceMs: Nanos = 30, longPressMs: Nanos = 0, state: RecorderState = .idle) -> ButtonMachine {
        var m = ButtonMachine(settings: .init(debounceNs: debounceMs * Self.ms, longPressNs: longPressMs * Self.ms))
        m.deviceOpened()
        m.connected(state: state, failing: nil)
        return m
    }

    /// Feeds an edge at `t` ms the way the main loop does: time first, then the edge.
    func edge(_ m: inout ButtonMachine, _ code: Int, _ role: ButtonRole, _ pressed: Bool, at t: Nanos) -> [ButtonCommand] {
        m.advance(to: t * Self.ms).commands + m.key(code: code, role: role, pressed: pressed, at: t * Self.ms).commands
    }

    /// reeld carries out every command sent, and says so (reply plus its status).
    func carryOut(_ m: inout ButtonMachine, _ commands: [ButtonCommand]) {
        for c in commands { m.replied(c, ok: true, state: c.after, error: nil) }
    }

    func testHoldPressStartsThenResumesAndReleasePauses() {
        var m = machine()
        XCTAssertEqual(edge(&m, space, .hold, true, at: 1000), [.start])
        XCTAssertEqual(m.pattern, .on)
        XCTAssertEqual(edge(&m, space, .hold, false, at: 2000), [.pause])
        XCTAssertEqual(m.pattern, .slowBlink)
        carryOut(&m, [.start, .pause])
        XCTAssertEqual(edge(&m, space, .hold, true, at: 3000), [.resume])
        XCTAssertEqual(edge(&m, space, .hold, false, at: 3500), [.pause])
    }

    func testAReleaseRightAfterThePressPausesBeforeReeldAnswers() {
        // The press's start is still in flight: the release must still pause what it started.
        var m = machine()
        XCTAssertEqual(edge(&m, space, .hold, true, at: 100), [.start])
        XCTAssertEqual(edge(&m, space, .hold, false, at: 140), [.pause])
        XCTAssertEqual(m.inFlight, 2)
        // An event of the start arriving meanwhile does not undo what was believed.
        m.stateEvent(.recording)
        XCTAssertEqual(m.state, .paused)
        m.replied(.start, ok: true, state: .recording, error: nil)
        XCTAssertEqual(m.state, .paused, "a reply while another command is in flight does not settle the state")
        m.replied(.pause, ok: true, state: .paused, error: nil)
        XCTAssertEqual(m.state, .paused)
    }

    func testBounceAfterAPressIsIgnoredAndTheLevelAtTheWindowsEndCounts() {
        var m = machine(debounceMs: 30)
        XCTAssertEqual(edge(&m, space, .hold, true, at: 1000), [.start], "the first edge is taken at once")
        XCTAssertEqual(edge(&m, space, .hold, false, at: 1005), [])
        XCTAssertEqual(edge(&m, space, .hold, true, at: 1010), [])
        XCTAssertEqual(edge(&m, space, .hold, false, at: 1020), [], "bounce within 30 ms")
        XCTAssertEqual(m.nextDeadline, 1030 * Self.ms)
        // The key ended the window released: the release is taken at the window's end.
        let out = m.advance(to: 1030 * Self.ms)
        XCTAssertEqual(out.commands, [.pause])
        XCTAssertEqual(out.taken.map(\.at), [1030 * Self.ms])
        XCTAssertEqual(out.taken.map(\.pressed), [false])
    }

    func testBounceThatEndsWhereItBeganIsNoEdge() {
        var m = machine(debounceMs: 30)
        XCTAssertEqual(edge(&m, space, .hold, true, at: 1000), [.start])
        XCTAssertEqual(edge(&m, space, .hold, false, at: 1003), [])
        XCTAssertEqual(edge(&m, space, .hold, true, at: 1006), [])
        XCTAssertEqual(m.advance(to: 1100 * Self.ms).commands, [])
        XCTAssertEqual(m.state, .recording)
        // After the window an edge is taken at once, at its own instant.
        let out = m.advance(to: 1500 * Self.ms)
        XCTAssertEqual(out, .init())
        XCTAssertEqual(m.key(code: space, role: .hold, pressed: false, at: 1500 * Self.ms).commands, [.pause])
    }

    func testKeysAreDebouncedSeparately() {
        var m = machine(debounceMs: 30, state: .recording)
        XCTAssertEqual(edge(&m, btn0, .toggle, true, at: 1000), [.pause])
        XCTAssertEqual(edge(&m, bksp, .retake, true, at: 1010), [.undo], "another key's window does not hold this one")
    }

    func testLongPressOfHoldStops() {
        var m = machine(longPressMs: 3000)
        XCTAssertEqual(edge(&m, space, .hold, true, at: 1000), [.start])
        XCTAssertEqual(m.nextDeadline, 1030 * Self.ms, "the debounce window first")
        XCTAssertEqual(m.advance(to: 1030 * Self.ms).commands, [])
        XCTAssertEqual(m.nextDeadline, 4000 * Self.ms)
        XCTAssertEqual(m.advance(to: 3999 * Self.ms).commands, [])
        let out = m.advance(to: 4100 * Self.ms)
        XCTAssertEqual(out.commands, [.stop])
        XCTAssertEqual(out.taken, [.init(code: space, role: .hold, pressed: true, at: 4000 * Self.ms, longPress: true)])
        XCTAssertNil(m.nextDeadline, "fired once")
        XCTAssertEqual(edge(&m, space, .hold, false, at: 5000), [], "the release after a long press sends nothing")
        carryOut(&m, [.start, .stop])
        m.stateEvent(.idle)
        XCTAssertEqual(m.pattern, .off)
    }

    func testWithoutALongPressAHoldRecordsAsLongAsItLasts() {
        var m = machine(longPressMs: 0)
        XCTAssertEqual(edge(&m, space, .hold, true, at: 1000), [.start])
        XCTAssertEqual(m.advance(to: 100_000 * Self.ms).commands, [])
        XCTAssertNil(m.nextDeadline)
        XCTAssertEqual(edge(&m, space, .hold, false, at: 100_000), [.pause])
    }

    func testToggleInEachState() {
        for (state, want) in [(RecorderState.idle, [ButtonCommand.start]), (.paused, [.resume]), (.recording, [.pause]), (.stopping, [])] {
            var m = machine(state: state)
            XCTAssertEqual(edge(&m, btn0, .toggle, true, at: 1000), want, "\(state)")
            XCTAssertEqual(edge(&m, btn0, .toggle, false, at: 1200), [], "a toggle's release does nothing (\(state))")
        }
    }

    func testHoldPressWhileRecordingOrStoppingSendsNothing() {
        for state in [RecorderState.recording, .stopping] {
            var m = machine(state: state)
            XCTAssertEqual(edge(&m, space, .hold, true, at: 1000), [], "\(state)")
        }
    }

    func testRetakeAndStopOnlyWhileARecordingExists() {
        for (state, retake, stop) in [(RecorderState.idle, [ButtonCommand](), [ButtonCommand]()), (.recording, [.undo], [.stop]),
                                      (.paused, [.undo], [.stop]), (.stopping, [], [])] {
            var m = machine(state: state)
            XCTAssertEqual(edge(&m, bksp, .retake, true, at: 1000), retake, "retake \(state)")
            var n = machine(state: state)
            XCTAssertEqual(edge(&n, esc, .stop, true, at: 1000), stop, "stop \(state)")
        }
        var m = machine(state: .recording)
        XCTAssertEqual(edge(&m, bksp, .retake, true, at: 1000), [.undo])
        XCTAssertEqual(m.state, .paused, "undo while recording leaves it paused")
        XCTAssertEqual(m.pattern, .slowBlink)
    }

    func testStateFollowsReeldsEventsWhenNothingIsInFlight() {
        var m = machine()
        m.stateEvent(.recording)  // e.g. `reelctl start`
        XCTAssertEqual(m.pattern, .on)
        XCTAssertEqual(edge(&m, btn0, .toggle, true, at: 1000), [.pause])
        m.replied(.pause, ok: true, state: .paused, error: nil)
        m.stateEvent(.stopping)
        XCTAssertEqual(m.pattern, .on)
        m.stateEvent(.idle)
        XCTAssertEqual(m.pattern, .off)
        XCTAssertEqual(edge(&m, space, .hold, true, at: 2000), [.start])
    }

    func testUnreachableReeldBlinksFastAndSendsNothing() {
        var m = machine(state: .recording)
        m.unreachable()
        XCTAssertEqual(m.pattern, .fastBlink)
        XCTAssertEqual(edge(&m, space, .hold, true, at: 1000), [])
        XCTAssertEqual(edge(&m, esc, .stop, true, at: 1000), [])
        m.stateEvent(.recording)
        XCTAssertEqual(m.pattern, .fastBlink, "a stray event does not make it reachable")
        m.connected(state: .paused, failing: nil)
        XCTAssertEqual(m.pattern, .slowBlink)
        XCTAssertEqual(edge(&m, btn0, .toggle, true, at: 2000), [.resume])
    }

    func testAnErrorBlinksFastUntilACommandIsCarriedOutOrARecordingBegins() {
        var m = machine(state: .recording)
        m.errorEvent("free space in /srv/reel fell to 90 MB")
        XCTAssertEqual(m.pattern, .fastBlink)
        m.stateEvent(.idle)
        XCTAssertEqual(m.pattern, .fastBlink, "the disk guard's stop does not hide its error")
        XCTAssertEqual(edge(&m, space, .hold, true, at: 1000), [.start])
        m.replied(.start, ok: false, state: .idle, error: "cannot start: no space")
        XCTAssertEqual(m.pattern, .fastBlink)
        XCTAssertEqual(m.state, .idle, "the refusal's status settles the state")
        XCTAssertEqual(edge(&m, space, .hold, false, at: 1500), [], "nothing to pause")
        m.stateEvent(.recording)  // started elsewhere
        XCTAssertEqual(m.pattern, .on)
        var n = machine(state: .idle)
        n.connected(state: .idle, failing: "standby: cannot open /dev/video0")
        XCTAssertEqual(n.pattern, .fastBlink)
        XCTAssertEqual(edge(&n, btn0, .toggle, true, at: 1000), [.start])
        n.replied(.start, ok: true, state: .recording, error: nil)
        XCTAssertEqual(n.pattern, .on)
    }

    func testAnUnpluggedDeviceReleasesItsKeysAndBlinksFast() {
        var m = machine()
        XCTAssertEqual(edge(&m, space, .hold, true, at: 1000), [.start])
        let out = m.deviceLost(at: 2000 * Self.ms)
        XCTAssertEqual(out.commands, [.pause], "a hold key held when the pedal went away is released")
        XCTAssertEqual(m.pattern, .fastBlink)
        m.deviceOpened()
        XCTAssertEqual(m.pattern, .slowBlink)
        XCTAssertEqual(edge(&m, space, .hold, true, at: 3000), [.resume])
    }

    func testNoDeviceYetBlinksFast() {
        var m = ButtonMachine(settings: .init())
        m.connected(state: .idle, failing: nil)
        XCTAssertEqual(m.pattern, .fastBlink)
        m.deviceOpened()
        XCTAssertEqual(m.pattern, .off)
    }
}

final class TallyPatternTests: XCTestCase {
    func testSteadyPatterns() {
        for t: Nanos in [0, 1, 499_999_999, 10_000_000_000] {
            XCTAssertTrue(TallyPattern.on.lit(at: t))
            XCTAssertFalse(TallyPattern.off.lit(at: t))
        }
        XCTAssertNil(TallyPattern.on.nextChange(after: 5))
        XCTAssertNil(TallyPattern.off.nextChange(after: 5))
    }

    func testBlinksAreHalfOnHalfOffAtTheirRates() {
        for (p, half) in [(TallyPattern.slowBlink, Nanos(500_000_000)), (.fastBlink, Nanos(125_000_000))] {
            XCTAssertTrue(p.lit(at: 0))
            XCTAssertTrue(p.lit(at: half - 1))
            XCTAssertFalse(p.lit(at: half))
            XCTAssertFalse(p.lit(at: 2 * half - 1))
            XCTAssertTrue(p.lit(at: 2 * half))
            XCTAssertEqual(p.nextChange(after: 0), half)
            XCTAssertEqual(p.nextChange(after: half - 1), half)
            XCTAssertEqual(p.nextChange(after: half), 2 * half)
            // Over ten periods: lit exactly half the time, sampled every ms.
            let samples = stride(from: Nanos(0), to: 20 * half, by: 1_000_000).filter { p.lit(at: $0) }.count
            XCTAssertEqual(samples, Int(10 * half / 1_000_000))
        }
    }
}
