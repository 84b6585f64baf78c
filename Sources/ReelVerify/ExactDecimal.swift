import ReelCore

extension Rational {
    /// Parses "2", "2.0667", "-0.5" or "31/15" exactly (seconds or milliseconds on a command line).
    public init?(exactDecimal text: String) {
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
        var value = Rational(whole)
        if parts.count == 2, !parts[1].isEmpty {
            guard let frac = Int64(parts[1]) else { return nil }
            var den: Int64 = 1
            for _ in 0..<parts[1].count { den *= 10 }
            value = value + Rational(frac, den)
        }
        self = neg ? Rational(0) - value : value
    }
}
