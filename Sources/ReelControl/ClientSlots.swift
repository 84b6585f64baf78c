/// The control server's bounds, chosen once when it is made.
public struct ControlLimits: Sendable, Equatable {
    /// Simultaneous clients. A new client beyond them takes the slot of the connection idle
    /// longest (see `ClientSlots`); only when every connection has a request at the handler is
    /// it sent `busy`.
    public var maxClients: Int
    /// A connection that is not an `events` stream and has no request at the handler is closed
    /// after this long without progress: no byte read from it and none of its replies written.
    public var idleTimeoutMs: Int64
    /// Unsent reply bytes above which the server takes no further request from that
    /// connection (and reads none) until the client has read them.
    public var maxUnsentReplyBytes: Int

    public init(maxClients: Int = 256, idleTimeoutMs: Int64 = 30_000, maxUnsentReplyBytes: Int = 64 * 1024) {
        self.maxClients = max(1, maxClients)
        self.idleTimeoutMs = max(1, idleTimeoutMs)
        self.maxUnsentReplyBytes = max(1, maxUnsentReplyBytes)
    }

    public static let standard = ControlLimits()
}

/// Which connection the control server closes, and when: the idle timeout and the choice of a
/// slot to free when a client arrives at the cap. A value on a clock the caller passes in
/// (CLOCK_MONOTONIC ms in the server; a manual clock in tests); the I/O thread only carries out
/// its answers.
///
/// Rules:
/// - A connection's clock starts when it is accepted and restarts at each sign of progress
///   (`progress`: bytes read from it, reply bytes written to it, a reply finished for it).
/// - A connection with a request at the handler (`busy`) never times out and is never evicted:
///   the request is being carried out and its reply is owed.
/// - An `events` subscriber never times out (it waits for events by design).
/// - Any other connection times out `idleTimeoutMs` after its last progress: one that never
///   sends, and one that stopped reading its replies.
/// - At the cap a new client is admitted by closing one connection that is not busy: a
///   refused peer (`forbidden`) first, then the non-subscriber idle longest, then the
///   subscriber idle longest. Only if every connection is busy is the new client refused
///   (`busy`); such requests end in bounded time, so a slot frees itself.
public struct ClientSlots: Sendable {
    public let limits: ControlLimits

    struct Entry: Sendable, Equatable {
        var lastProgressMs: Int64
        var busy = false
        var subscriber = false
        var forbidden = false
    }

    private(set) var entries: [UInt64: Entry] = [:]

    public init(limits: ControlLimits) {
        self.limits = limits
    }

    public var count: Int { entries.count }
    public var isFull: Bool { entries.count >= limits.maxClients }

    public enum Admission: Equatable, Sendable {
        /// A slot is free.
        case admit
        /// Close this connection first; the new one takes its slot.
        case evict(UInt64)
        /// Every connection has a request at the handler: answer `busy` and close.
        case refuse
    }

    /// What to do with a client that has just connected. The caller then calls `add` (after
    /// closing the evicted one, which it removes with `remove`) or refuses it.
    public func admission() -> Admission {
        guard isFull else { return .admit }
        let candidates = entries.filter { !$0.value.busy }
        // Rank: refused peers, then requesters, then subscribers; within a rank the one idle
        // longest, then the oldest id (a stable choice for equal times).
        let victim = candidates.min { a, b in
            let ra = Self.rank(a.value), rb = Self.rank(b.value)
            if ra != rb { return ra < rb }
            if a.value.lastProgressMs != b.value.lastProgressMs { return a.value.lastProgressMs < b.value.lastProgressMs }
            return a.key < b.key
        }
        return victim.map { .evict($0.key) } ?? .refuse
    }

    private static func rank(_ e: Entry) -> Int { e.forbidden ? 0 : e.subscriber ? 2 : 1 }

    public mutating func add(_ id: UInt64, nowMs: Int64, forbidden: Bool = false) {
        entries[id] = Entry(lastProgressMs: nowMs, forbidden: forbidden)
    }

    public mutating func remove(_ id: UInt64) {
        entries[id] = nil
    }

    /// Bytes were read from the connection or written to it, or a reply was finished for it.
    public mutating func progress(_ id: UInt64, nowMs: Int64) {
        entries[id]?.lastProgressMs = nowMs
    }

    /// A request of the connection went to the handler (true) or its reply came back (false).
    public mutating func setBusy(_ id: UInt64, _ busy: Bool, nowMs: Int64) {
        entries[id]?.busy = busy
        entries[id]?.lastProgressMs = nowMs
    }

    /// The connection became an `events` stream.
    public mutating func subscribed(_ id: UInt64) {
        entries[id]?.subscriber = true
    }

    private func timesOut(_ e: Entry) -> Bool { !e.busy && !e.subscriber }

    /// The connections idle for `idleTimeoutMs` or more at `nowMs`, oldest id first.
    public func expired(nowMs: Int64) -> [UInt64] {
        entries.filter { timesOut($0.value) && nowMs - $0.value.lastProgressMs >= limits.idleTimeoutMs }
            .map(\.key).sorted()
    }

    /// The next instant a connection times out (nil: none can), for the I/O thread's poll.
    public func nextDeadlineMs() -> Int64? {
        entries.values.filter(timesOut).map { $0.lastProgressMs + limits.idleTimeoutMs }.min()
    }

    /// How long the connection has gone without progress at `nowMs` (0 if unknown).
    public func idleMs(_ id: UInt64, nowMs: Int64) -> Int64 {
        entries[id].map { nowMs - $0.lastProgressMs } ?? 0
    }
}
