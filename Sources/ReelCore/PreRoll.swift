/// Pre-roll (`pre_roll = S`, needs standby): a `start` records from S before its request reached
/// reeld. Every decision about it, as values over times passed in (CLOCK_MONOTONIC ns):
///
/// - Raw frames are kept: the warm sources' slots already hold them, so the pre-roll costs no CPU
///   while idle (encoding while idle costs x264's full CPU all day, and could not start the file
///   exactly on an arbitrary frame). Each warm source's pool gets `slots(...)` more slots (S plus
///   `margin` of its items), preallocated once at open; while idle the sources keep what was
///   captured in the last `holdNs` (audio `audioHoldMargin` more), at most those extra slots.
/// - Its memory (the extra slots x slot bytes, video and audio) may not exceed `pre_roll_max_mb`
///   (`memoryProblem`); a pre-roll without standby is refused (`standbyProblem`).
/// - A start wants the configured S, or less (`forStart`; more is refused naming both). It is
///   armed at `requestedAt - want`, never before what is held begins (the sources opened, or the
///   last recording gave them back, less than S ago): `start` says where, and what it got.
/// - The hand-over drops nothing: the session's queue holds every slot of both pools at once
///   (`queueCapacity`), and while the pipeline catches up the live slots stay free for the frames
///   still coming (the backlog shrinks as long as the encoder is faster than real time).
public struct PreRoll: Equatable, Sendable {
    /// The configured pre-roll, ns (0: none).
    public let duration: Nanos

    public init(_ duration: Nanos) { self.duration = max(0, duration) }

    /// Held beyond S: the start is armed a little after its request reached reeld (the recorder's
    /// lock, borrowing the sources), and what was captured S before the request must still be
    /// there then. Also what standby keeps without a pre-roll (`StandbyState.preroll`).
    public static let margin: Nanos = StandbyState.preroll
    /// The longest pre-roll a setting or a start may name (memory bounds it well before).
    public static let maxSeconds = 300

    /// How long the idle sources keep what they captured (video; audio `audioHoldMargin` more).
    public var holdNs: Nanos { duration + Self.margin }
    public var audioHoldNs: Nanos { holdNs + StandbyState.audioHoldMargin }

    /// Extra pool slots for items of `itemFrames` frames at `rate` (a video frame: 1 at the frame
    /// rate; an audio chunk: its frames at the sample rate) to cover `hold`, plus one for the item
    /// being captured. 0 without a pre-roll (the pools are as before).
    static func slots(hold: Nanos, itemFrames: Int64, rate: Rational) -> Int {
        guard hold > 0, itemFrames > 0, rate.num > 0 else { return 0 }
        // items = hold x rate / itemFrames, rounded up: hold ns x num / (den x 1e9 x itemFrames).
        return Int(rescale(hold, rate.num, rate.den * nanosPerSecond * itemFrames, rounding: .up)) + 1
    }

    /// Extra slots of a video pool at `fps`.
    public func videoSlots(fps: Rational) -> Int {
        duration == 0 ? 0 : Self.slots(hold: holdNs, itemFrames: 1, rate: fps)
    }

    /// Extra slots of an audio pool whose chunks are `chunkFrames` long at `sampleRate`.
    public func audioSlots(chunkFrames: Int, sampleRate: Int) -> Int {
        duration == 0 ? 0 : Self.slots(hold: audioHoldNs, itemFrames: Int64(chunkFrames), rate: Rational(Int64(sampleRate), 1))
    }

    /// How many items of a stream the idle sources may hold: the pre-roll's extra slots, or
    /// without a pre-roll half the pool (the rest stays free for capture).
    public func holdCap(poolSlots: Int, extraSlots: Int) -> Int {
        duration == 0 ? max(1, poolSlots / 2) : max(1, extraSlots)
    }

    /// The audio slot the memory check assumes: 10 ms chunks (the synthetic source's; ALSA's
    /// period is asked near it), each slot one frame longer, as the synthetic source sizes them.
    public static func chunkFrames(sampleRate: Int) -> Int { sampleRate / 100 }

    /// Bytes the pre-roll's extra slots hold: video frames of `frameBytes` at `fps` (nil: no
    /// video) and audio chunks of S16 samples (nil: no audio).
    public func bytes(video: (frameBytes: Int, fps: Rational)?, audio: AudioFormat?) -> Int64 {
        var total: Int64 = 0
        if let v = video { total += Int64(videoSlots(fps: v.fps)) * Int64(v.frameBytes) }
        if let a = audio {
            let chunk = Self.chunkFrames(sampleRate: a.sampleRate)
            total += Int64(audioSlots(chunkFrames: chunk, sampleRate: a.sampleRate)) * Int64((chunk + 1) * a.channels * 2)
        }
        return total
    }

    /// The memory check: nil when `bytes` fit in `limitMB` (MB of 1,000,000 bytes), else the
    /// error naming both figures and the fix.
    public func memoryProblem(bytes: Int64, limitMB: Int) -> String? {
        guard duration > 0, bytes > Int64(limitMB) * 1_000_000 else { return nil }
        let needed = (bytes + 999_999) / 1_000_000
        return "pre_roll \(Self.seconds(duration)) s needs \(needed) MB of raw frames and audio at this size and frame rate, more than pre_roll_max_mb \(limitMB) MB (shorten pre_roll, lower the size or fps, or raise pre_roll_max_mb to at least \(needed))"
    }

    /// A pre-roll needs the sources kept open: nil when fine, else the error and the fix.
    public func standbyProblem(standby: Bool, canBeWarm: Bool) -> String? {
        guard duration > 0 else { return nil }
        if !standby { return "pre_roll \(Self.seconds(duration)) s needs standby = true (the pre-roll is kept by the warm devices): turn standby on, or set pre_roll = 0" }
        if !canBeWarm { return "pre_roll \(Self.seconds(duration)) s needs live sources kept warm (a camera, an ALSA device or the paced test sources; files and --unpaced cannot be): use them, or set pre_roll = 0" }
        return nil
    }

    /// A start's own pre-roll (`preRollNs`; nil: the configured one): at most the configured, the
    /// most standby keeps. Else the error naming both figures and the fix.
    public func forStart(_ asked: Nanos?) -> Result<Nanos, PreRollRefusal> {
        guard let asked else { return .success(duration) }
        if asked < 0 { return .failure(PreRollRefusal(message: "bad \"preRollNs\": \(asked) is negative (ns; 0 for none)")) }
        if asked > duration {
            return .failure(PreRollRefusal(message: "bad \"preRollNs\": a pre-roll of \(Self.seconds(asked)) s is more than the configured pre_roll of \(Self.seconds(duration)) s, which is all standby keeps (ask for at most \(Self.seconds(duration)) s, or raise pre_roll in reeld.toml)"))
        }
        return .success(asked)
    }

    /// How far before its request's arrival a start may say its user asked (`atNs`: a button's
    /// input event): the way the request came (a process woken late, the socket, a busy host)
    /// then costs no frame. Well inside what the warm sources hold beyond the pre-roll (`margin`).
    public static let askedWindow: Nanos = 250_000_000

    /// The instant a start counts from: the one its user asked at (`at`), at most `askedWindow`
    /// before the request reached reeld (`requestedAt`; older counts as that far back), never
    /// after it (a later one, or none, is the arrival). No subtraction of `at`: any Int64 is safe.
    public static func askedAt(requestedAt: Nanos, at: Nanos?) -> Nanos {
        guard let at else { return requestedAt }
        return min(requestedAt, max(at, requestedAt - askedWindow))
    }

    /// Where a start asked at `requestedAt` wanting `want` of pre-roll begins: `requestedAt - want`,
    /// but never before `heldFrom` (the earliest instant the held media of every stream covers;
    /// nil: nothing held). `got` is the pre-roll it gets (`requestedAt - at`, 0 to `want`).
    public static func start(requestedAt: Nanos, want: Nanos, heldFrom: Nanos?) -> (at: Nanos, got: Nanos) {
        let wanted = requestedAt - max(0, want)
        let at = min(requestedAt, max(wanted, heldFrom ?? requestedAt))
        return (at, requestedAt - at)
    }

    /// The earliest instant every stream's held media covers: the latest of the streams' earliest
    /// held items (nil: a stream holds nothing, or there is no stream).
    public static func heldFrom(video: Nanos??, audio: Nanos??) -> Nanos? {
        var from: Nanos?
        for s in [video, audio] {
            guard let stream = s else { continue }  // no such source
            guard let first = stream else { return nil }  // the source holds nothing yet
            from = max(from ?? first, first)
        }
        return from
    }

    /// What a start at `now` would get: the configured pre-roll, or less when what is held began later.
    public func available(now: Nanos, heldFrom: Nanos?) -> Nanos {
        Self.start(requestedAt: now, want: duration, heldFrom: heldFrom).got
    }

    /// The recording's queue: every slot of both pools may be in it at once (the held pre-roll
    /// handed over in one go), plus room for the requests; never below the live default.
    public static func queueCapacity(videoSlots: Int, audioSlots: Int) -> Int {
        max(1024, videoSlots + audioSlots + 64)
    }

    /// Seconds as written in settings ("1.5", "3"): ns to at most 3 decimals, no Double.
    public static func seconds(_ ns: Nanos) -> String {
        let whole = ns / nanosPerSecond, ms = (ns % nanosPerSecond) / 1_000_000
        guard ms != 0 else { return "\(whole)" }
        var frac = String(ms)
        frac = String(repeating: "0", count: 3 - frac.count) + frac
        while frac.hasSuffix("0") { frac.removeLast() }
        return "\(whole).\(frac)"
    }

    /// A pre-roll as people write it ("1.5": seconds, up to 3 decimals, 0 to `maxSeconds`) in
    /// ns, never via a floating-point number; nil if malformed or out of range.
    public static func parse(_ t: String) -> Nanos? {
        guard let ns = LengthCap.parse(t), ns <= Int64(maxSeconds) * nanosPerSecond else { return nil }
        return ns
    }

    /// Why `t` is not a pre-roll, and what to write instead.
    public static func problem(_ t: String) -> String {
        "'\(t)' is not a number of seconds from 0 to \(maxSeconds) with at most 3 decimals, e.g. 1.5 (0: no pre-roll)"
    }
}

/// A start's pre-roll refused: a `bad_request` message naming both figures and the fix.
public struct PreRollRefusal: Error, Equatable, Sendable { public let message: String }
