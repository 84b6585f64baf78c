/// Time in Reel is integers only: nanoseconds on CLOCK_MONOTONIC (`Nanos`), sample counts,
/// and exact rationals for rates. No `Double` ever carries a timestamp.
public typealias Nanos = Int64

public let nanosPerSecond: Int64 = 1_000_000_000

/// An exact positive rational such as a frame rate (30/1, 30000/1001) or a time base (1/90000).
public struct Rational: Hashable, Sendable, CustomStringConvertible, Codable {
    public let num: Int64
    public let den: Int64

    public init(_ num: Int64, _ den: Int64 = 1) {
        self.init(wide: Int128(num), Int128(den))
    }

    /// Reduced from a 128-bit numerator and denominator (the products of the arithmetic below),
    /// which must fit 64 bits once reduced.
    public init(wide n: Int128, _ d: Int128) {
        precondition(d != 0, "Rational with zero denominator")
        var (n, d) = d < 0 ? (-n, -d) : (n, d)
        var (a, b) = (n.magnitude, d.magnitude)
        while b != 0 { (a, b) = (b, a % b) }
        if a > 1 { n /= Int128(a); d /= Int128(a) }
        guard let nn = Int64(exactly: n), let dd = Int64(exactly: d) else {
            preconditionFailure("Rational \(n)/\(d) does not fit 64 bits")
        }
        num = nn; den = dd
    }

    public static func gcd(_ a: Int64, _ b: Int64) -> Int64 {
        var (a, b) = (a, b)
        while b != 0 { (a, b) = (b, a % b) }
        return a
    }

    public var description: String { den == 1 ? "\(num)" : "\(num)/\(den)" }

    /// Parses "30", "30/1", "30000/1001".
    public init?(parsing text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let n = Int64(parts[0]), n > 0 else { return nil }
        let d = parts.count == 2 ? Int64(parts[1]) : 1
        guard let d, d > 0 else { return nil }
        self.init(n, d)
    }
}

/// Exact arithmetic, in 128 bits and reduced: time bases (1/15360, 1/90000) times hours of ticks
/// never overflow. `reelctl verify` computes every time in these (the port of its Python twin's
/// `fractions.Fraction`); `Double` only for printing.
extension Rational: Comparable {
    public static func + (a: Rational, b: Rational) -> Rational {
        Rational(wide: Int128(a.num) * Int128(b.den) + Int128(b.num) * Int128(a.den), Int128(a.den) * Int128(b.den))
    }
    public static func - (a: Rational, b: Rational) -> Rational {
        Rational(wide: Int128(a.num) * Int128(b.den) - Int128(b.num) * Int128(a.den), Int128(a.den) * Int128(b.den))
    }
    public static func * (a: Rational, b: Rational) -> Rational {
        Rational(wide: Int128(a.num) * Int128(b.num), Int128(a.den) * Int128(b.den))
    }
    public static func / (a: Rational, b: Rational) -> Rational {
        Rational(wide: Int128(a.num) * Int128(b.den), Int128(a.den) * Int128(b.num))
    }
    public static func * (a: Rational, k: Int64) -> Rational { a * Rational(k) }
    public static func < (a: Rational, b: Rational) -> Bool {
        Int128(a.num) * Int128(b.den) < Int128(b.num) * Int128(a.den)
    }
    public var magnitude: Rational { num < 0 ? Rational(-num, den) : self }
    /// "15/1", "1/15360": always with a denominator (`description` leaves out "/1").
    public var ratioText: String { "\(num)/\(den)" }
    /// For printing only.
    public var double: Double { Double(num) / Double(den) }

    /// floor(self), like Python's math.floor on a Fraction.
    public var floor: Int64 {
        let q = num / den
        return (num % den != 0 && num < 0) ? q - 1 : q
    }
    /// ceil(self).
    public var ceil: Int64 { -Rational(-num, den).floor }
    /// round(self), halves to even, like Python's round(Fraction).
    public var roundedHalfEven: Int64 {
        let f = floor
        let twice = (self - Rational(f)) * 2   // in [0, 2)
        if twice < Rational(1) { return f }
        if Rational(1) < twice { return f + 1 }
        return f % 2 == 0 ? f : f + 1
    }

    /// The closest rational with denominator at most `maxDen`: Python's Fraction.limit_denominator.
    public func limitDenominator(_ maxDen: Int64) -> Rational {
        precondition(maxDen >= 1)
        if den <= maxDen { return self }
        var (p0, q0, p1, q1): (Int64, Int64, Int64, Int64) = (0, 1, 1, 0)
        var (n, d) = (num, den)
        while true {
            let a = Rational(n, d).floor
            let q2 = q0 + a * q1
            if q2 > maxDen { break }
            (p0, q0, p1, q1) = (p1, q1, p0 + a * p1, q2)
            (n, d) = (d, n - a * d)
        }
        let k = (maxDen - q0) / q1
        let bound1 = Rational(p0 + k * p1, q0 + k * q1)
        let bound2 = Rational(p1, q1)
        return (bound2 - self).magnitude <= (bound1 - self).magnitude ? bound2 : bound1
    }
}

/// Integer rescaling `value * num / den` with a chosen rounding, computed in 128 bits so that
/// nanosecond timestamps hours long times 90 kHz or 192 kHz never overflow.
public enum Rounding: Sendable { case down, up, nearest }

public func rescale(_ value: Int64, _ num: Int64, _ den: Int64, rounding: Rounding = .nearest) -> Int64 {
    precondition(den > 0 && num >= 0)
    let neg = value < 0
    let mag = UInt64(value.magnitude)
    let (hi, lo) = mag.multipliedFullWidth(by: UInt64(num))
    let d = UInt64(den)
    var (q, r) = d.dividingFullWidth((hi, lo))
    // Round the magnitude; for negative values "down"/"up" swap meaning.
    let wantUp: Bool
    switch rounding {
    case .nearest: wantUp = r >= d - r // half away from zero
    case .down: wantUp = neg && r != 0
    case .up: wantUp = !neg && r != 0
    }
    if wantUp && r != 0 { q += 1; r = 0 }
    return neg ? -Int64(q) : Int64(q)
}

/// CLOCK_MONOTONIC abstraction so the core and the pipeline can be driven by a test clock.
public protocol MonotonicClock: Sendable {
    func now() -> Nanos
}

/// Parses decimal seconds ("30", "2.5", "0.125") exactly into ns; nil if malformed or negative.
public func parseSeconds(_ text: String) -> Nanos? {
    guard !text.isEmpty, text != "." else { return nil }
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    guard (1...2).contains(parts.count), let whole = Int64(parts[0].isEmpty ? "0" : String(parts[0])), whole >= 0,
          whole < 1_000_000_000 else { return nil }
    var frac: Int64 = 0
    if parts.count == 2 {
        let digits = parts[1]
        guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        frac = Int64(digits + String(repeating: "0", count: 9 - digits.count))!
    }
    return whole * nanosPerSecond + frac
}

/// The length cap (`max_duration`, `reelctl start --max-duration`) as people write it.
public enum LengthCap {
    /// The longest cap, seconds (a week).
    public static let maxSeconds = 604_800

    /// Seconds ("90", "2.5": up to 3 decimals) exactly in ns, never via a floating-point number;
    /// nil if malformed or above `maxSeconds`. 0 means no cap.
    public static func parse(_ t: String) -> Nanos? {
        let parts = t.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), !parts[0].isEmpty, parts[0].allSatisfy({ $0.isASCII && $0.isNumber }),
              parts.count == 1 || (1...3).contains(parts[1].count),
              let ns = parseSeconds(t), ns <= Int64(maxSeconds) * nanosPerSecond else { return nil }
        return ns
    }

    /// Why `t` is not a cap, and what to write instead.
    public static func problem(_ t: String) -> String {
        "'\(t)' is not a number of seconds from 0 to \(maxSeconds) with at most 3 decimals, e.g. 90 or 2.5 (0: no cap)"
    }
}

/// "00:01:23.456"
public func formatDuration(_ ns: Nanos) -> String {
    let ms = ns / 1_000_000
    let s = ms / 1000
    func pad(_ v: Int64, _ w: Int) -> String { let t = String(v); return String(repeating: "0", count: max(0, w - t.count)) + t }
    return "\(pad(s / 3600, 2)):\(pad(s / 60 % 60, 2)):\(pad(s % 60, 2)).\(pad(ms % 1000, 3))"
}
