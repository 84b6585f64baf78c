/// A failure with its whole explanation: what failed, why, and the fix, as the user reads it.
public struct RecorderFailure: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ d: String) { description = d }
}
