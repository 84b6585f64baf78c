import ReelCore
import ReelSystem

/// A few threads of reel-web's own for blocking work (a control-socket request, crypt, a file
/// read), so that none of it runs on the HTTP server's event loops or Swift's cooperative pool.
/// @unchecked Sendable: the queue is the only state and is itself thread-safe.
public final class BlockingPool: @unchecked Sendable {
    public struct Busy: Error, CustomStringConvertible {
        public var description: String { "reel-web is busy: too many requests wait for reeld or the disk (try again)" }
    }

    private let queue: BlockingQueue<@Sendable () -> Void>

    /// `threads` workers named `name-N`; at most `backlog` jobs wait (more are refused with `Busy`).
    public init(name: String, threads: Int, backlog: Int = 256) {
        queue = BlockingQueue(capacity: backlog)
        for i in 0..<threads {
            NamedThread.start("\(name)-\(i)") { [queue] in
                while let job = queue.take(until: nil) { job() }
            }
        }
    }

    /// Runs `body` on one of the pool's threads and returns its result.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let accepted = queue.offer {
                continuation.resume(with: Result { try body() })
            }
            if !accepted { continuation.resume(throwing: Busy()) }
        }
    }
}
