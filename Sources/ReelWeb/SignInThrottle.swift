import ReelCore

/// When a sign-in attempt may be checked and how long a wrong password waits for its 401: a
/// value on the caller's clock (CLOCK_MONOTONIC ns), so its tests run on a manual one.
///
/// Per client address: after `n` failures in a row the next answer waits 0.5 s × 2^(n-1), at most
/// 8 s, and a further attempt from that address is not even checked before the previous wait has
/// passed (parallel guesses queue up instead of each getting its own check). Overall, over every
/// address, the same doubling starts after `overallAllowance` failures, so guessing from many
/// addresses slows down as well. A success clears its address (and the overall count); without
/// failures the counts decay by one every `decayNs`.
public struct SignInThrottle: Sendable, Equatable {
    public static let baseDelayNs: Nanos = 500_000_000
    public static let maxDelayNs: Nanos = 8 * nanosPerSecond
    public static let decayNs: Nanos = 60 * nanosPerSecond
    /// Failures from all addresses together before the overall delay begins.
    public static let overallAllowance = 10
    /// Addresses remembered at most (the quietest are forgotten first).
    public static let maxClients = 4096

    struct Entry: Sendable, Equatable {
        var failures = 0
        var lastFailure: Nanos = 0
        /// No attempt is checked before this instant.
        var notBefore: Nanos = 0

        mutating func decay(now: Nanos) {
            guard failures > 0, now > lastFailure else { return }
            let steps = Int((now - lastFailure) / SignInThrottle.decayNs)
            if steps > 0 {
                failures = max(0, failures - steps)
                lastFailure += Nanos(steps) * SignInThrottle.decayNs
            }
        }
    }

    var clients: [String: Entry] = [:]
    var overall = Entry()

    public init() {}

    /// The wait after `failures` failures in a row: none, then 0.5 s doubling up to 8 s.
    public static func delay(afterFailures failures: Int) -> Nanos {
        guard failures > 0 else { return 0 }
        let shift = min(failures - 1, 5)
        return min(maxDelayNs, baseDelayNs << Nanos(shift))
    }

    static func overallDelay(afterFailures failures: Int) -> Nanos {
        delay(afterFailures: failures - overallAllowance)
    }

    /// The instant at which an attempt from `client` arriving at `now` may be checked. Reserves
    /// it: a further attempt from the same address (or, past the allowance, any address) is
    /// admitted no earlier than one more failure's delay later.
    public mutating func admit(client: String, now: Nanos) -> Nanos {
        var entry = clients[client] ?? Entry()
        entry.decay(now: now)
        overall.decay(now: now)
        let at = max(now, entry.notBefore, overall.notBefore)
        entry.notBefore = at + Self.delay(afterFailures: entry.failures + 1)
        overall.notBefore = at + Self.overallDelay(afterFailures: overall.failures + 1)
        clients[client] = entry
        prune(now: now)
        return at
    }

    /// A wrong password from `client` checked at `now`: how long to wait before answering it.
    public mutating func failed(client: String, now: Nanos) -> Nanos {
        var entry = clients[client] ?? Entry()
        entry.decay(now: now)
        overall.decay(now: now)
        entry.failures += 1
        entry.lastFailure = now
        overall.failures += 1
        overall.lastFailure = now
        let wait = max(Self.delay(afterFailures: entry.failures), Self.overallDelay(afterFailures: overall.failures))
        entry.notBefore = max(entry.notBefore, now + wait)
        overall.notBefore = max(overall.notBefore, now + Self.overallDelay(afterFailures: overall.failures))
        clients[client] = entry
        return wait
    }

    /// The right password from `client`: its address and the overall count start afresh.
    public mutating func succeeded(client: String, now: Nanos) {
        clients[client] = nil
        overall = Entry()
    }

    /// The failures counted against `client` at `now` (after decay), for tests and logs.
    public func failures(client: String, now: Nanos) -> Int {
        var entry = clients[client] ?? Entry()
        entry.decay(now: now)
        return entry.failures
    }

    public var rememberedClients: Int { clients.count }

    private mutating func prune(now: Nanos) {
        guard clients.count > Self.maxClients else { return }
        clients = clients.filter { _, e in
            var e = e
            e.decay(now: now)
            return e.failures > 0 || e.notBefore > now
        }
        while clients.count > Self.maxClients, let quietest = clients.min(by: { $0.value.lastFailure < $1.value.lastFailure }) {
            clients[quietest.key] = nil
        }
    }
}
