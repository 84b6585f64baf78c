/// An exact rational for time bases, frame rates and timestamps in seconds: the port of the
/// oracle's `fractions.Fraction`. Products are formed in 128 bits and reduced, so stream time
/// bases (1/15360, 1/90000) times hours of ticks never overflow. Times stay exact; `Double` is
/// only produced for printing and for the beep onset's sub-sample fraction.
public struct Fraction: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let num: Int64
    public let den: Int64   // > 0

    public init(_ num: Int64, _ den: Int64 = 1) {
        self.init(wide: Int128(num), Int128(den))
    }

    init(wide n: Int128, _ d: Int128) {
        precondition(d != 0, "Fraction with zero denominator")
        var (n, d) = d < 0 ? (-n, -d) : (n, d)
        let g = Fraction.gcd(n.magnitude, d.magnitude)
        if g > 1 { n /= Int128(g); d /= Int128(g) }
        guard let nn = Int64(exactly: n), let dd = Int64(exactly: d) else {
            preconditionFailure("Fraction \(n)/\(d) does not fit 64 bits")
        }
        num = nn; den = dd
    }

    static func gcd(_ a: UInt128, _ b: UInt128) -> UInt128 {
        var (a, b) = (a, b)
        while b != 0 { (a, b) = (b, a % b) }
        return a
    }

    /// "15/1", "1/15360": always with a denominator, as the oracle's JSON writes them.
    public var description: String { "\(num)/\(den)" }
    public var double: Double { Double(num) / Double(den) }

    public static func + (a: Fraction, b: Fraction) -> Fraction {
        Fraction(wide: Int128(a.num) * Int128(b.den) + Int128(b.num) * Int128(a.den), Int128(a.den) * Int128(b.den))
    }
    public static func - (a: Fraction, b: Fraction) -> Fraction {
        Fraction(wide: Int128(a.num) * Int128(b.den) - Int128(b.num) * Int128(a.den), Int128(a.den) * Int128(b.den))
    }
    public static func * (a: Fraction, b: Fraction) -> Fraction {
        Fraction(wide: Int128(a.num) * Int128(b.num), Int128(a.den) * Int128(b.den))
    }
    public static func / (a: Fraction, b: Fraction) -> Fraction {
        Fraction(wide: Int128(a.num) * Int128(b.den), Int128(a.den) * Int128(b.num))
    }
    public static func * (a: Fraction, k: Int64) -> Fraction { a * Fraction(k) }
    public static func < (a: Fraction, b: Fraction) -> Bool {
        Int128(a.num) * Int128(b.den) < Int128(b.num) * Int128(a.den)
    }
    public var magnitude: Fraction { num < 0 ? Fraction(-num, den) : self }

    /// floor(self), like Python's math.floor on a Fraction.
    public var floor: Int64 {
        let q = num / den
        return (num % den != 0 && num < 0) ? q - 1 : q
    }
    /// ceil(self).
    public var ceil: Int64 { -Fraction(-num, den).floor }
    /// round(self), halves to even, like Python's round(Fraction).
    public var roundedHalfEven: Int64 {
        let f = floor
        let rem = self - Fraction(f)           // in [0, 1)
        let twice = rem * 2
        if twice < Fraction(1) { return f }
        if Fraction(1) < twice { return f + 1 }
        return f % 2 == 0 ? f : f + 1
    }

    /// The closest fraction with denominator at most `maxDen`: Python's Fraction.limit_denominator.
    public func limitDenominator(_ maxDen: Int64) -> Fraction {
        precondition(maxDen >= 1)
        if den <= maxDen { return self }
        var (p0, q0, p1, q1): (Int64, Int64, Int64, Int64) = (0, 1, 1, 0)
        var (n, d) = (num, den)
        while true {
            let a = Fraction(n, 1).floorDiv(d)
            let q2 = q0 + a * q1
            if q2 > maxDen { break }
            (p0, q0, p1, q1) = (p1, q1, p0 + a * p1, q2)
            (n, d) = (d, n - a * d)
        }
        let k = (maxDen - q0) / q1
        let bound1 = Fraction(p0 + k * p1, q0 + k * q1)
        let bound2 = Fraction(p1, q1)
        return (bound2 - self).magnitude <= (bound1 - self).magnitude ? bound2 : bound1
    }

    /// Parses "2", "2.0667", "-0.5" or "31/15" exactly (seconds or milliseconds on a command line).
    public init?(parsing text: String) {
        let t = text.trimmingSpaces()
        if let slash = t.firstIndex(of: "/") {
            guard let n = Int64(t[..<slash]), let d = Int64(t[t.index(after: slash)...]), d != 0 else { return nil }
            self.init(n, d)
            return
        }
        let neg = t.hasPrefix("-")
        let body = neg ? t.dropFirst() : Substring(t)
        let parts = body.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), body.contains(where: \.isNumber),
              parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              parts.count == 1 || parts[1].count <= 12 else { return nil }
        let whole = parts[0].isEmpty ? 0 : Int64(parts[0])
        guard let whole else { return nil }
        var value = Fraction(whole)
        if parts.count == 2, !parts[1].isEmpty {
            guard let frac = Int64(parts[1]) else { return nil }
            var den: Int64 = 1
            for _ in 0..<parts[1].count { den *= 10 }
            value = value + Fraction(frac, den)
        }
        self = neg ? Fraction(0) - value : value
    }

    private func floorDiv(_ d: Int64) -> Int64 { Fraction(num, d).floor }
}
