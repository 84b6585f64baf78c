import Foundation
import Logging
import ReelControl
import ReelCore
import ReelSystem

/// `GET /preview.mjpg`'s source: one reeld `preview` subscription per (width, fps) while at
/// least one browser watches it, its frames handed to every viewer as ready-made multipart parts.
/// Each viewer keeps only the newest part waiting: a slow browser loses frames, never delays the
/// others or reeld.
/// @unchecked Sendable: `feeds` is guarded by `lock`.
public final class PreviewHub: @unchecked Sendable {
    public struct Key: Hashable, Sendable {
        public let width: Int
        public let fps: Int
        public init(width: Int, fps: Int) { self.width = width; self.fps = fps }
    }

    /// What a viewer gets: a multipart part (boundary, headers, JPEG), or the end with its reason.
    public enum Item: Sendable {
        case part([UInt8])
        case end(String)
    }

    /// Distinct (width, fps) feeds at once (reeld allows 8 preview subscribers in all).
    public static let maxFeeds = 4
    public static let boundary = "reelframe"

    final class Feed: Sendable {
        let fanout = Fanout<Item>(keep: 1)
        let subscription: ReeldSubscription
        init(subscription: ReeldSubscription) { self.subscription = subscription }
    }

    private let socketPath: String
    private let logger: Logger
    private let lock = Monitor()
    private var feeds: [Key: Feed] = [:]

    public init(socketPath: String, logger: Logger) {
        self.socketPath = socketPath
        self.logger = logger
    }

    /// A new viewer of `key`'s feed (started if it is the first): its stream, and the function
    /// to call when it leaves. nil when `maxFeeds` other feeds are running.
    public func watch(_ key: Key) -> (stream: AsyncStream<Item>, leave: @Sendable () -> Void)? {
        lock.withLock { () -> (AsyncStream<Item>, @Sendable () -> Void)? in
            let feed: Feed
            if let running = feeds[key] {
                feed = running
            } else {
                guard feeds.count < Self.maxFeeds else { return nil }
                feed = startFeed(key)
                feeds[key] = feed
            }
            let (id, stream) = feed.fanout.add()
            return (stream, { [weak self] in self?.leave(key, feed: feed, id: id) })
        }
    }

    public var feedCount: Int { lock.withLock { feeds.count } }

    /// Ends every viewer's stream (shutdown).
    public func endAll() {
        let all = lock.withLock { Array(feeds.values) }
        for feed in all { feed.fanout.finishAll() }
    }

    private func leave(_ key: Key, feed: Feed, id: Int) {
        lock.withLock {
            feed.fanout.remove(id)
            if feed.fanout.count == 0, feeds[key] === feed {
                feed.subscription.stop()
                feeds[key] = nil
            }
        }
    }

    private func startFeed(_ key: Key) -> Feed {
        let request = Array(#"{"v":1,"id":1,"cmd":"preview","width":\#(key.width),"fps":\#(key.fps)}"#.utf8)
        // The feed is made before its thread can call back: the box hands it over once set.
        let box = FeedBox()
        let subscription = ReeldSubscription(name: "web-preview", socketPath: socketPath, requestLine: request) { [weak self] event in
            guard let self, let feed = box.feed else { return }
            self.onPreview(event, key: key, feed: feed)
        }
        let feed = Feed(subscription: subscription)
        box.feed = feed
        return feed
    }

    private func onPreview(_ event: ReeldSubscription.Event, key: Key, feed: Feed) {
        switch event {
        case let .line(line):
            if let part = Self.part(fromLine: line) { feed.fanout.send(.part(part)) }
        case let .refused(error):
            logger.warning("reeld refused a preview of width \(key.width) at \(key.fps) fps: \(error.message)")
            feed.fanout.send(.end(error.message))
            feed.fanout.finishAll()
            lock.withLock { if feeds[key] === feed { feeds[key] = nil } }
        case .up, .down:
            break  // the viewers keep their last frame; frames resume when reeld is back
        }
    }

    /// One multipart part from a reeld `preview` line; nil for other lines (`preview_state`).
    public static func part(fromLine line: [UInt8]) -> [UInt8]? {
        struct Frame: Decodable { let event: String; let capturedNs: Int64?; let jpeg: String? }
        guard let frame = try? JSONDecoder().decode(Frame.self, from: Data(line)), frame.event == "preview",
              let text = frame.jpeg, let jpeg = Data(base64Encoded: text), !jpeg.isEmpty else { return nil }
        var part = Array("--\(boundary)\r\nContent-Type: image/jpeg\r\nContent-Length: \(jpeg.count)\r\nX-Captured-Ns: \(frame.capturedNs ?? 0)\r\n\r\n".utf8)
        part.append(contentsOf: jpeg)
        part.append(contentsOf: Array("\r\n".utf8))
        return part
    }
}

/// Hands a feed to its subscription's thread, which may start before the feed exists.
/// @unchecked Sendable: `feed` is guarded by `lock`.
final class FeedBox: @unchecked Sendable {
    private let lock = Monitor()
    private var _feed: PreviewHub.Feed?
    var feed: PreviewHub.Feed? {
        get { lock.withLock { _feed } }
        set { lock.withLock { _feed = newValue } }
    }
}
