import Foundation
import ReelControl
import ReelCore
import ReelSystem

/// One subscription to reeld (`events`, `levels` or `preview`) on a thread of its own: connects,
/// sends the request line, then hands every line to `handler` until stopped. When reeld goes away
/// (or refuses for a while, `busy`), it says so and tries again after 0.5 s, doubling up to 8 s.
/// A `bad_request` or `forbidden` refusal ends it: asking again would get the same answer.
/// @unchecked Sendable: `stopped` is guarded by `monitor`; the client lives on the thread only.
public final class ReeldSubscription: @unchecked Sendable {
    public enum Event: Sendable {
        /// reeld accepted: its reply line.
        case up([UInt8])
        /// One line of the stream.
        case line([UInt8])
        /// reeld cannot be reached, or dropped the stream: the reason; a retry follows.
        case down(String)
        /// reeld refused for good: its error; the subscription has ended.
        case refused(ControlError)
    }

    static let firstBackoffNs: Nanos = 500_000_000
    static let maxBackoffNs: Nanos = 8 * nanosPerSecond
    /// How often a blocked read looks whether it was stopped.
    static let stopCheckMs = 1000

    private let monitor = Monitor()
    private var stopped = false

    /// Starts the thread `name`, which sends `requestLine` to the socket at `socketPath`.
    public init(name: String, socketPath: String, requestLine: [UInt8], handler: @escaping @Sendable (Event) -> Void) {
        NamedThread.start(name) { [self] in
            run(socketPath: socketPath, requestLine: requestLine, handler: handler)
        }
    }

    /// Ends the subscription: the thread closes its connection within `stopCheckMs` (a line
    /// already read may still reach the handler).
    public func stop() {
        monitor.withLock { stopped = true; monitor.broadcast() }
    }

    private var isStopped: Bool { monitor.withLock { stopped } }

    private func run(socketPath: String, requestLine: [UInt8], handler: @Sendable (Event) -> Void) {
        var backoff = Self.firstBackoffNs
        while !isStopped {
            do {
                let client = try ControlClient(path: socketPath)
                let replyLine = try client.exchange(requestLine, timeoutMs: 15_000)
                let reply = try? JSONDecoder().decode(Reply.self, from: Data(replyLine))
                if let reply, reply.ok, reply.subscribed == true {
                    backoff = Self.firstBackoffNs
                    handler(.up(replyLine))
                    while !isStopped {
                        do {
                            handler(.line(try client.nextLine(timeoutMs: Self.stopCheckMs)))
                        } catch let error as SocketError where error.kind == .timedOut {
                            continue
                        }
                    }
                    return
                }
                let error = reply?.error ?? .failed("reeld on \(socketPath) answered with something reel-web cannot read: \(String(decoding: replyLine.prefix(200), as: UTF8.self))")
                if error.code == ControlError.Code.badRequest || error.code == ControlError.Code.forbidden {
                    handler(.refused(error))
                    return
                }
                handler(.down(error.message))
            } catch {
                if isStopped { return }
                handler(.down("\(error)"))
            }
            let deadline = SystemClock.now() + backoff
            monitor.withLock {
                while !stopped, monitor.wait(until: deadline) {}
            }
            backoff = min(Self.maxBackoffNs, backoff * 2)
        }
    }
}
