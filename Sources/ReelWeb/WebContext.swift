import Hummingbird
import NIOCore

/// Hummingbird's request (ReelControl has a `Request` too: files that import both say this name).
public typealias WebRequest = Request

/// Per request: Hummingbird's own part and the client's address (the sign-in throttle's key).
public struct WebContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let clientAddress: String

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        clientAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }
}

/// An `application/x-www-form-urlencoded` body (the sign-in form).
public enum FormBody {
    /// The first value of field `name`, decoded (`+` is a space); nil when absent or malformed.
    public static func field(_ name: String, in body: String) -> String? {
        for pair in body.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard decode(parts[0]) == name else { continue }
            return parts.count == 2 ? decode(parts[1]) : ""
        }
        return nil
    }

    static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
