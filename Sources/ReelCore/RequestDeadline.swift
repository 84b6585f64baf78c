/// A control request on its way to the pipeline, with the instant its requester stops waiting:
/// the one decision both sides make on it, so that it is applied or cancelled, never both, and
/// never applied once its requester was told it failed (a retry would then act twice).
///
/// The rules, on an injected clock:
/// - The pipeline takes it (`take(now:)`) before applying it: before the deadline and not given
///   up, it is taken (apply it, then answer); else it is cancelled (drop it unapplied).
/// - The requester, at its deadline with no answer, gives it up (`giveUp()`): not yet taken, it
///   is cancelled for good (answer "not applied"); taken already, the pipeline is applying it and
///   its answer is coming (wait for it: the request did act).
/// - Once taken or cancelled, it stays so.
public struct RequestDeadline: Equatable, Sendable {
    public enum State: Equatable, Sendable {
        /// In the queue: neither side has decided.
        case queued
        /// The pipeline took it: it is applied, its answer is due.
        case taken
        /// Given up, or its deadline passed before the pipeline took it: never applied.
        case cancelled
    }

    /// The requester waits for an answer until this instant (CLOCK_MONOTONIC ns).
    public let deadline: Nanos
    public private(set) var state: State = .queued

    public init(deadline: Nanos) { self.deadline = deadline }

    /// The pipeline, about to apply the request at `now`: true: apply it and answer; false: it is
    /// cancelled (its requester gave up, or would have by `now`), drop it.
    public mutating func take(now: Nanos) -> Bool {
        guard state == .queued, now < deadline else {
            if state == .queued { state = .cancelled }
            return state == .taken
        }
        state = .taken
        return true
    }

    /// The requester, its deadline passed with no answer: true: the request is cancelled and will
    /// never be applied; false: the pipeline took it already, its answer is coming.
    public mutating func giveUp() -> Bool {
        if state == .taken { return false }
        state = .cancelled
        return true
    }
}
