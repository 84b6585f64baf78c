import ReelCore

/// The signed-in browsers: a session token (32 random bytes, hex) each, valid until it has gone
/// unused for `idleNs` (12 h). A value on the caller's clock (CLOCK_MONOTONIC ns); tokens come from
/// the caller too, so tests choose them. Kept in memory only: restarting reel-web signs everyone out.
public struct SessionStore: Sendable, Equatable {
    public static let idleNs: Nanos = 12 * 3600 * nanosPerSecond
    /// Sessions kept at most; beyond, the least recently used is dropped.
    public static let maxSessions = 256
    /// Bytes of randomness in a token.
    public static let tokenBytes = 32

    /// Token -> when it was last used.
    var lastUsed: [String: Nanos] = [:]

    public init() {}

    /// A fresh token from the system's random source (getrandom(2), through the standard
    /// library's SystemRandomNumberGenerator), as 64 lowercase hex digits.
    public static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return hex((0..<tokenBytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `token` has the shape of one of ours (64 lowercase hex digits): anything else is
    /// refused before a lookup.
    public static func wellFormed(_ token: String) -> Bool {
        let u = token.utf8
        return u.count == tokenBytes * 2 && u.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Starts a session for `token` at `now`.
    public mutating func open(_ token: String, now: Nanos) {
        expire(now: now)
        while lastUsed.count >= Self.maxSessions, let oldest = lastUsed.min(by: { $0.value < $1.value }) {
            lastUsed[oldest.key] = nil
        }
        lastUsed[token] = now
    }

    /// Whether `token` is a live session at `now`; if so it counts as used (its idle time starts again).
    public mutating func touch(_ token: String, now: Nanos) -> Bool {
        guard Self.wellFormed(token), let used = lastUsed[token] else { return false }
        guard now - used < Self.idleNs else {
            lastUsed[token] = nil
            return false
        }
        lastUsed[token] = max(used, now)
        return true
    }

    /// Ends the session of `token` (sign-out).
    public mutating func close(_ token: String) {
        lastUsed[token] = nil
    }

    /// Drops every session idle for `idleNs` or longer.
    public mutating func expire(now: Nanos) {
        lastUsed = lastUsed.filter { now - $0.value < Self.idleNs }
    }

    public var count: Int { lastUsed.count }
}
