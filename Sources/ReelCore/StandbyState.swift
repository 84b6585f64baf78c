/// Standby (`standby = true`, warm devices): every decision about the sources kept open while
/// idle, as a value over an injected clock (CLOCK_MONOTONIC ns passed in). The owner
/// (`Standby` in ReelService) opens and closes the devices and asks this what to do.
///
/// The rules:
/// - Enabled, the sources are opened at once and kept streaming while idle (`warm`); a recording
///   borrows them (`lent`) and gives them back when it ends.
/// - An open that fails, or a source that fails while warm or lent (camera unplugged), makes the
///   standby `failed`: the message names the device; a new open is due after a delay that starts
///   at `retryInitial` and doubles up to `retryMax` while it keeps failing (a device that is
///   gone is not hammered, one plugged back is found within `retryMax`).
/// - `start` borrows warm sources; while `failed` it is refused with the failure and when the
///   next attempt is due; while an open is under way it waits for it.
/// - Reconfigured (SIGHUP) with other sources, warm ones are closed and opened again at once; lent
///   ones when they come back.
/// - Media held for a start: while idle the last `preroll` of media; from the start instant on,
///   the video frames captured at or after it and the audio chunks that may reach past it
///   (`keepsAudio`; the timeline cuts them to the sample): nothing captured before the instant
///   reaches the file, and nothing after it is lost while the recording is set up.
public struct StandbyState: Equatable, Sendable {
    public enum Phase: Equatable, Sendable {
        /// Standby is off (or the sources cannot be warm: files, unpaced).
        case off
        /// An open is due (`at`), or under way (`opening`).
        case closed(dueAt: Nanos)
        case opening
        /// Streaming while idle since `since`.
        case warm(since: Nanos)
        /// Borrowed by the recording.
        case lent
        /// The last open failed, or a source failed: `message` names it; the next open is due at `retryAt`.
        case failed(message: String, at: Nanos, retryAt: Nanos)
    }

    public static let retryInitial: Nanos = 500_000_000
    public static let retryMax: Nanos = 4 * nanosPerSecond
    /// Audio chunks are held from this long before a start instant, so the chunk holding it is
    /// kept (chunks are at most ~10-20 ms).
    public static let audioHoldMargin: Nanos = 100_000_000
    /// While idle the warm sources keep this much of what they captured (at most half of each
    /// pool), so that the start instant (when the request reached reeld) can lie before the
    /// moment the recording is set up to take it, and an idle snapshot is the latest frame at once.
    public static let preroll: Nanos = 500_000_000

    public private(set) var phase: Phase
    /// Consecutive failures (the retry delay doubles with each).
    public private(set) var failures = 0
    /// Reopen when the sources come back from a recording (the settings changed meanwhile).
    private var reopenOnReturn = false

    public init(enabled: Bool, now: Nanos) {
        phase = enabled ? .closed(dueAt: now) : .off
    }

    public var isEnabled: Bool { phase != .off }

    /// The delay before the next attempt after `failures` consecutive failures.
    public static func retryDelay(failures: Int) -> Nanos {
        var d = retryInitial
        for _ in 1..<max(1, failures) where d < retryMax { d *= 2 }
        return min(d, retryMax)
    }

    /// Whether the owner should open the sources now, or else until when it may wait (nil: until
    /// something happens).
    public func openDue(now: Nanos) -> (open: Bool, wakeAt: Nanos?) {
        switch phase {
        case let .closed(due): return (due <= now, due)
        case let .failed(_, _, retry): return (retry <= now, retry)
        case .off, .opening, .warm, .lent: return (false, nil)
        }
    }

    /// The owner begins an open (after `openDue` said so).
    public mutating func opening() { if case .off = phase { return }; phase = .opening }

    /// The open succeeded: the sources stream from now on.
    public mutating func opened(now: Nanos) {
        guard phase == .opening else { return }
        failures = 0
        phase = .warm(since: now)
    }

    /// An open failed, or a warm or lent source failed (`message` names the device and the error).
    public mutating func failed(_ message: String, now: Nanos) {
        guard phase != .off else { return }
        failures += 1
        phase = .failed(message: message, at: now, retryAt: now + Self.retryDelay(failures: failures))
    }

    /// What a `start` gets: the warm sources (`.borrow`, the phase becomes `lent`), a wait for
    /// the open under way, a refusal naming the failure, or `.cold` (standby off: open them as usual).
    public enum StartDecision: Equatable, Sendable { case borrow, wait, refuse(String), cold }

    public mutating func start(now: Nanos) -> StartDecision {
        switch phase {
        case .off: return .cold
        case .warm: phase = .lent; return .borrow
        case .opening, .closed: return .wait
        case .lent: return .refuse("the devices are in use by another recording (a bug in reeld; see its log)")
        case let .failed(message, _, retry):
            let secs = max(0, retry - now + nanosPerSecond / 2) / nanosPerSecond
            return .refuse("standby: \(message); reeld retries it \(secs == 0 ? "now" : "in \(secs) s") (check the device, then 'reelctl status')")
        }
    }

    /// A start that borrowed the sources could not begin (or the recording ended): they come back.
    /// `failure` is set when a source failed meanwhile. Returns true when the owner must close
    /// them (a failure, or settings that changed while they were lent).
    public mutating func returned(failure: String?, now: Nanos) -> Bool {
        guard phase == .lent else { return false }
        if let failure { failed(failure, now: now); return true }
        if reopenOnReturn { reopenOnReturn = false; phase = .closed(dueAt: now); return true }
        phase = .warm(since: now)
        return false
    }

    /// The sources' settings changed (SIGHUP), or standby was switched on or off. Returns true
    /// when the owner must close the warm sources now.
    public mutating func reconfigured(enabled: Bool, sourcesChanged: Bool, now: Nanos) -> Bool {
        switch (phase, enabled) {
        case (.off, false): return false
        case (.off, true): phase = .closed(dueAt: now); return false
        case (.lent, false): phase = .off; reopenOnReturn = false; return false  // closed when they come back
        case (.lent, true): if sourcesChanged { reopenOnReturn = true }; return false
        case (_, false): let close = isOpen; phase = .off; failures = 0; return close
        case (_, true):
            guard sourcesChanged else { return false }
            let close = isOpen
            failures = 0
            phase = .closed(dueAt: now)
            return close
        }
    }

    /// True while the owner holds open sources (warm; lent ones belong to the recording).
    public var isOpen: Bool { if case .warm = phase { return true }; return false }

    /// For `status`: nil when off, else "warm", "opening" or "failed".
    public var statusWord: String? {
        switch phase {
        case .off: return nil
        case .closed, .opening: return "opening"
        case .warm, .lent: return "warm"
        case .failed: return "failed"
        }
    }

    /// Whether a held video frame captured at `time` may go to a recording that starts at `start`.
    public static func keepsVideo(capturedAt time: Nanos, start: Nanos) -> Bool { time >= start }
    /// Whether a held audio chunk that begins at `time` may (the timeline cuts it to the sample).
    public static func keepsAudio(capturedAt time: Nanos, start: Nanos) -> Bool { time >= start - audioHoldMargin }
}
