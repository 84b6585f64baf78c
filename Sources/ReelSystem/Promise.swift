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
