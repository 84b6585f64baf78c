import Glibc
import ReelCore

/// A value delivered once, awaited with a deadline.
/// @unchecked Sendable: guarded by `monitor`.
public final class Promise<Value: Sendable>: @unchecked Sendable {
    private let monitor = Monitor()
    private var value: Value?
    public init() {}
    public func fulfill(_ v: Value) { monitor.withLock { if value == nil { value = v; monitor.broadcast() } } }
    public func wait(until deadline: Nanos?) -> Value? {
        monitor.withLock {
            while value == nil { if !monitor.wait(until: deadline) { break } }
            return value
        }
    }
}

/// The answer to a request its requester waits for only until a deadline: the pipeline takes it
/// (`take`) before applying it, the requester waits (`wait`); `RequestDeadline` decides between
/// them, so a request given up on is never applied afterwards.
/// @unchecked Sendable: `ticket` and `value` are only touched inside `monitor.withLock`.
public final class DeadlineReply<Value: Sendable>: @unchecked Sendable {
    public enum Answer: Sendable {
        /// The pipeline applied it (or refused it) and said so.
        case answered(Value)
        /// Not taken by the deadline: cancelled, never applied.
        case cancelled
        /// Taken before the deadline, but no answer within the grace after it: it may have acted.
        case unanswered
    }
    private let monitor = Monitor()
    private var ticket: RequestDeadline
    private var value: Value?

    public init(deadline: Nanos) { ticket = RequestDeadline(deadline: deadline) }

    public var deadline: Nanos { ticket.deadline }

    /// The pipeline, about to apply the request: false: it was given up on; drop it unanswered.
    public func take(now: Nanos) -> Bool { monitor.withLock { ticket.take(now: now) } }

    public func fulfill(_ v: Value) { monitor.withLock { if value == nil { value = v; monitor.broadcast() } } }

    /// The requester: the answer by the deadline; else cancelled, unless the pipeline took it
    /// already, in which case its answer is awaited up to `grace` longer.
    public func wait(grace: Nanos) -> Answer {
        monitor.withLock {
            while value == nil { if !monitor.wait(until: ticket.deadline) { break } }
            if let value { return .answered(value) }
            if ticket.giveUp() { return .cancelled }
            while value == nil { if !monitor.wait(until: ticket.deadline + grace) { break } }
            return value.map { .answered($0) } ?? .unanswered
        }
    }
}
