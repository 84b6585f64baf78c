import ReelCore

/// What the tally light shows: on while recording, a slow blink while paused, off while idle, a
/// fast blink when something is wrong (reeld unreachable, the input device gone, an error).
/// Blinks are phased on the clock itself (CLOCK_MONOTONIC), so every light of a host blinks alike.
public enum TallyPattern: String, Sendable, Equatable, CaseIterable {
    case off, on, slowBlink = "slow-blink", fastBlink = "fast-blink"

    /// Half a period of the slow blink (1 Hz) and of the fast one (4 Hz).
    public static let slowHalfNs: Nanos = 500_000_000
    public static let fastHalfNs: Nanos = 125_000_000

    private var halfNs: Nanos? {
        switch self {
        case .off, .on: return nil
        case .slowBlink: return Self.slowHalfNs
        case .fastBlink: return Self.fastHalfNs
        }
    }

    /// Whether the light is lit at `t`: a blink is lit in the first half of each period.
    public func lit(at t: Nanos) -> Bool {
        switch self {
        case .off: return false
        case .on: return true
        case .slowBlink, .fastBlink:
            let half = halfNs!
            let phase = ((t % (2 * half)) + 2 * half) % (2 * half)
            return phase < half
        }
    }

    /// The first instant after `t` at which `lit` changes (nil: never, a steady pattern).
    public func nextChange(after t: Nanos) -> Nanos? {
        guard let half = halfNs else { return nil }
        let floor = t >= 0 ? t / half : (t - half + 1) / half
        return (floor + 1) * half
    }
}
