import ReelControl
import ReelCore

/// What a key does (`[button]` in reeld.toml).
public enum ButtonRole: String, Sendable, Equatable, CaseIterable {
    /// Press starts or resumes, release pauses (Vine's gesture); held `longPressNs`: stop.
    case hold
    /// Press starts, resumes or pauses.
    case toggle
    /// Press undoes the last take.
    case retake
    /// Press stops (the file is finished).
    case stop
}

/// A request reel-button sends to reeld.
public enum ButtonCommand: String, Sendable, Equatable {
    case start, resume, pause, undo, stop

    /// The state reeld is in once it has carried this out.
    var after: RecorderState {
        switch self {
        case .start, .resume: return .recording
        case .pause, .undo: return .paused
        case .stop: return .stopping
        }
    }
}

/// The decisions of reel-button, with no clock and no I/O: key edges (with the input event's own
/// timestamp), the passing of time, and what is known of reeld go in; the commands to send and
/// the tally pattern come out. All instants are CLOCK_MONOTONIC ns (the input events' clock).
///
/// Debounce: a key's first edge is taken at once (no added latency); edges in the `debounceNs`
/// after a taken one are bounce, and only the key's level at the end of that window counts (a
/// release that bounced is taken then). Key repeats are not edges.
///
/// reeld's state: from `status` at (re)connect and from `state` events. A command sent changes
/// the state believed at once (a release right after a press must pause what the press started,
/// before reeld's event comes); while commands are in flight, events are not taken (they may be
/// older than the command), and the last reply (or a `status` after a refusal) settles it.
public struct ButtonMachine: Sendable {
    public struct Settings: Sendable, Equatable {
        /// Edges within this long after a taken edge of the same key are bounce.
        public var debounceNs: Nanos
        /// A `hold` key held this long stops the recording (0: never).
        public var longPressNs: Nanos

        public init(debounceNs: Nanos = 30_000_000, longPressNs: Nanos = 0) {
            self.debounceNs = debounceNs
            self.longPressNs = longPressNs
        }
    }

    /// A key edge that was taken (after debounce), with the instant it counts from.
    public struct Taken: Sendable, Equatable {
        public var code: Int
        public var role: ButtonRole
        public var pressed: Bool
        public var at: Nanos
        /// A `hold` key held for the long press (not an edge of the key itself).
        public var longPress: Bool
    }

    /// What one input produced: the edges taken and the commands to send, in order.
    public struct Output: Sendable, Equatable {
        public var taken: [Taken] = []
        public var commands: [ButtonCommand] = []
        public init(taken: [Taken] = [], commands: [ButtonCommand] = []) {
            self.taken = taken
            self.commands = commands
        }
    }

    private struct Key: Sendable {
        var role: ButtonRole
        /// The level taken (after debounce) and the level last seen.
        var down = false
        var raw = false
        /// Until then, edges are bounce.
        var lockedUntil: Nanos?
        /// When the taken press began (hold keys: for the long press) and whether it fired.
        var pressedAt: Nanos?
        var longFired = false
    }

    public let settings: Settings
    private var keys: [Int: Key] = [:]

    /// reeld's state as believed (nil: reeld unreachable, or not yet asked).
    public private(set) var state: RecorderState?
    /// Commands sent and not yet answered.
    public private(set) var inFlight = 0
    /// An error reeld reported, or a command it refused; cleared by the next command carried out
    /// or a recording beginning.
    public private(set) var fault: String?
    /// Whether the input device is open (false until `deviceOpened`, and from its loss until it is open again).
    public private(set) var devicePresent = false

    public init(settings: Settings) {
        self.settings = settings
    }

    /// The tally light's pattern now.
    public var pattern: TallyPattern {
        guard let state, devicePresent, fault == nil else { return .fastBlink }
        switch state {
        case .idle: return .off
        case .recording, .stopping: return .on
        case .paused: return .slowBlink
        }
    }

    /// The next instant `advance(to:)` has something to decide at (a debounce window ending, a long press).
    public var nextDeadline: Nanos? {
        var next: Nanos?
        for key in keys.values {
            if let t = key.lockedUntil { next = min(next ?? t, t) }
            if key.role == .hold, settings.longPressNs > 0, key.down, !key.longFired, let p = key.pressedAt {
                let t = p + settings.longPressNs
                next = min(next ?? t, t)
            }
        }
        return next
    }

    // MARK: the input device

    /// A key edge of the input device at `at` (its event's timestamp). Call `advance(to: at)` first.
    public mutating func key(code: Int, role: ButtonRole, pressed: Bool, at: Nanos) -> Output {
        var key = keys[code] ?? Key(role: role)
        key.role = role
        key.raw = pressed
        keys[code] = key
        if let lock = key.lockedUntil, at < lock { return Output() }
        keys[code]!.lockedUntil = nil
        guard pressed != key.down else { return Output() }
        return take(code: code, pressed: pressed, at: at)
    }

    /// Lets time pass up to `now`: debounce windows that end take the key's level then; a
    /// `hold` key held `longPressNs` stops.
    public mutating func advance(to now: Nanos) -> Output {
        var out = Output()
        while let due = firstDue(now) {
            let (code, at, isLock) = due
            if isLock {
                keys[code]!.lockedUntil = nil
                let key = keys[code]!
                if key.raw != key.down { append(&out, take(code: code, pressed: key.raw, at: at)) }
            } else {
                keys[code]!.longFired = true
                out.taken.append(Taken(code: code, role: .hold, pressed: true, at: at, longPress: true))
                if state == .recording || state == .paused { out.commands += send(.stop) }
            }
        }
        return out
    }

    /// The input device went away (unplugged, an error): held keys count as released then.
    public mutating func deviceLost(at: Nanos) -> Output {
        devicePresent = false
        var out = Output()
        for code in keys.keys.sorted() where keys[code]!.down {
            keys[code]!.raw = false
            keys[code]!.lockedUntil = nil
            append(&out, take(code: code, pressed: false, at: at))
        }
        keys = [:]
        return out
    }

    /// The input device is open (again). Keys held at that moment count only once released and pressed.
    public mutating func deviceOpened() {
        devicePresent = true
        keys = [:]
    }

    // MARK: reeld

    /// Connected to reeld: its `status` (`state`; `failing` when it reports a standing fault,
    /// e.g. a standby device that failed).
    public mutating func connected(state: RecorderState, failing: String?) {
        self.state = state
        inFlight = 0
        fault = failing
    }

    /// reeld cannot be reached (or the event stream ended): nothing can be sent until `connected`.
    public mutating func unreachable() {
        state = nil
        inFlight = 0
    }

    /// A `state` event.
    public mutating func stateEvent(_ s: RecorderState) {
        guard state != nil, inFlight == 0 else { return }
        state = s
        if s == .recording { fault = nil }
    }

    /// An `error` event: shown until a command is carried out or a recording begins.
    public mutating func errorEvent(_ message: String) {
        fault = message
    }

    /// The answer to a command sent: carried out or not, and reeld's state with it (from the
    /// reply, or a `status` asked after a refusal; nil when none could be had).
    public mutating func replied(_ command: ButtonCommand, ok: Bool, state reported: RecorderState?, error: String?) {
        inFlight = max(0, inFlight - 1)
        if ok { fault = nil } else { fault = error ?? "reeld refused \(command.rawValue)" }
        if inFlight == 0, state != nil, let reported { state = reported }
    }

    // MARK: decisions

    private mutating func take(code: Int, pressed: Bool, at: Nanos) -> Output {
        var key = keys[code]!
        key.down = pressed
        key.lockedUntil = at + settings.debounceNs
        let wasLong = key.longFired
        if pressed {
            key.pressedAt = at
            key.longFired = false
        } else {
            key.pressedAt = nil
        }
        keys[code] = key
        var out = Output(taken: [Taken(code: code, role: key.role, pressed: pressed, at: at, longPress: false)])
        guard let state else { return out }  // reeld unreachable: nothing to send to
        switch (key.role, pressed) {
        case (.hold, true), (.toggle, true):
            switch state {
            case .idle: out.commands = send(.start)
            case .paused: out.commands = send(.resume)
            case .recording: if key.role == .toggle { out.commands = send(.pause) }
            case .stopping: break
            }
        case (.hold, false):
            if state == .recording, !wasLong { out.commands = send(.pause) }
        case (.retake, true):
            if state == .recording || state == .paused { out.commands = send(.undo) }
        case (.stop, true):
            if state == .recording || state == .paused { out.commands = send(.stop) }
        case (.toggle, false), (.retake, false), (.stop, false):
            break
        }
        return out
    }

    private mutating func send(_ command: ButtonCommand) -> [ButtonCommand] {
        inFlight += 1
        state = command.after
        return [command]
    }

    /// The earliest deadline at or before `now`: a key code, its instant, and whether it ends a
    /// debounce window (else it is a long press).
    private func firstDue(_ now: Nanos) -> (Int, Nanos, Bool)? {
        var best: (Int, Nanos, Bool)?
        for code in keys.keys.sorted() {
            let key = keys[code]!
            if let t = key.lockedUntil, t <= now, best == nil || t < best!.1 { best = (code, t, true) }
            if key.role == .hold, settings.longPressNs > 0, key.down, !key.longFired, let p = key.pressedAt {
                let t = p + settings.longPressNs
                if t <= now, best == nil || t < best!.1 { best = (code, t, false) }
            }
        }
        return best
    }

    private func append(_ out: inout Output, _ more: Output) {
        out.taken += more.taken
        out.commands += more.commands
    }
}
