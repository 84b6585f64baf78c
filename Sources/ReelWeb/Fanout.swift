import ReelSystem

/// The browsers watching one feed: each gets its own AsyncStream, buffered as the feed chooses
/// (the newest few: a slow browser loses the oldest, it never holds the others up). `first` and
/// `last` run, under the lock, when the first one comes and the last one goes.
/// @unchecked Sendable: all state is guarded by `monitor`.
final class Fanout<Element: Sendable>: @unchecked Sendable {
    private let monitor = Monitor()
    private var next = 0
    private var streams: [Int: AsyncStream<Element>.Continuation] = [:]
    private let keep: Int

    /// `keep`: the elements a stream holds for its reader at most (1: latest wins).
    init(keep: Int) { self.keep = keep }

    /// A new reader: its id (for `remove`) and its stream. `whenFirst` runs if it is the first.
    func add(whenFirst: () -> Void = {}) -> (id: Int, stream: AsyncStream<Element>) {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: .bufferingNewest(keep))
        return monitor.withLock {
            next += 1
            streams[next] = continuation
            if streams.count == 1 { whenFirst() }
            return (next, stream)
        }
    }

    /// Drops reader `id` (its stream ends); `whenLast` runs if no reader is left.
    func remove(_ id: Int, whenLast: () -> Void = {}) {
        monitor.withLock {
            guard let c = streams.removeValue(forKey: id) else { return }
            c.finish()
            if streams.isEmpty { whenLast() }
        }
    }

    /// Hands `element` to every reader without waiting.
    func send(_ element: Element) {
        monitor.withLock {
            for c in streams.values { c.yield(element) }
        }
    }

    /// Ends every reader's stream (they remove themselves as they notice).
    func finishAll() {
        monitor.withLock {
            for c in streams.values { c.finish() }
        }
    }

    var count: Int { monitor.withLock { streams.count } }
}
