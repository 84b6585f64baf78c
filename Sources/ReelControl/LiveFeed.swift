import Foundation
import ReelCore
import ReelSystem

/// The `preview` and `levels` streams' subscribers and what waits for each (`preview` and
/// `levels` connections of the control server).
///
/// Producers never wait here beyond a brief lock: the preview thread offers each encoded frame
/// to the subscribers that take it, the audio capture thread writes each closed levels window
/// into storage made once, and each subscriber keeps only the newest (`LatestSlot`: latest
/// wins; a replaced frame counts in the next line's `dropped`). The server's I/O thread takes a
/// subscriber's line only when that connection has written everything before (`take`), so a
/// slow reader loses frames and delays nobody. Lines are made on the I/O thread: a frame's
/// JPEG (base64) once per frame and width, its `seq` and `dropped` per subscriber.
/// @unchecked Sendable: `state` is touched only inside `monitor.withLock` (`locked`).
public final class LiveFeed: @unchecked Sendable {
    /// One encoded frame, shared by every subscriber taking it at its width.
    public struct Frame: Sendable {
        public var width: Int
        public var height: Int
        public var capturedNs: Nanos
        public var publishedNs: Nanos
        public var bytes: Int
        /// `,"bytes":N,"jpeg":"...","at":N}\n`: the shared tail of the line.
        let tail: [UInt8]
    }

    private struct Subscriber {
        var preview: PreviewGrant?
        var frames = LatestSlot<Frame>()
        /// A `preview_state` line not yet taken (only the latest matters).
        var state: [UInt8]?
        /// Levels: the last window number taken.
        var levelsSeen: Int64 = 0
    }

    private struct Levels {
        var peak: [Double] = []
        var rms: [Double] = []
        var capturedNs: Nanos = 0
        var at: Nanos = 0
        /// Windows published so far (0: none yet).
        var number: Int64 = 0
    }

    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 1
        var wakers: [@Sendable () -> Void] = []
        var limits = PreviewLimits()
        /// The open camera, asked at each subscription (nil: none open).
        var camera: @Sendable () -> PreviewCamera? = { nil }
        var liveness = PreviewLiveness()
        var levels = Levels()
        var levelsSubscribers = 0
        /// Bumped at every change of the preview subscribers (the preview thread waits for it).
        var generation: Int64 = 0
    }

    // Monitor, not Mutex: the preview thread waits for subscribers (`waitForPreview`).
    private let monitor = Monitor()
    private var state = State()

    public init() {}

    private func locked<R>(_ body: (inout State) -> R) -> R { monitor.withLock { body(&state) } }

    /// Called (outside the lock) after every publish, e.g. to wake the server's I/O thread.
    public func addWaker(_ waker: @escaping @Sendable () -> Void) {
        locked { $0.wakers.append(waker) }
    }

    private func wake(_ wakers: [@Sendable () -> Void]) { for w in wakers { w() } }

    // MARK: Settings and the camera (the recorder)

    /// The settings bounding every preview (`preview_max_width`, `preview_max_fps`).
    public func setLimits(_ limits: PreviewLimits) { locked { $0.limits = limits } }

    /// Where the open camera's format is asked for at each `preview` subscription (it returns
    /// nil while none is open). Called outside the feed's lock; it must not block.
    public func setCameraSource(_ source: @escaping @Sendable () -> PreviewCamera?) { locked { $0.camera = source } }

    // MARK: Subscriptions (the server's I/O thread)

    public enum Refusal: Error, Equatable {
        case badRequest(String)
        case busy(String)
    }

    /// A new `preview` subscriber, or why not (out of range: `badRequest`; the 9th: `busy`).
    /// While no camera is open it gets the current `preview_state` line at once.
    public func subscribePreview(width: Int?, fps: Int?) -> Result<(id: UInt64, grant: PreviewGrant), Refusal> {
        let camera = locked { $0.camera }()
        let (result, wakers): (Result<(id: UInt64, grant: PreviewGrant), Refusal>, [@Sendable () -> Void]) = locked { s in
            let count = s.subscribers.values.filter { $0.preview != nil }.count
            guard count < PreviewLimits.maxSubscribers else {
                return (.failure(.busy("reeld already streams \(PreviewLimits.maxSubscribers) previews, its maximum; close one (or share one stream) and try again")), [])
            }
            switch PreviewGrant.check(width: width, fps: fps, camera: camera, limits: s.limits) {
            case let .failure(why): return (.failure(.badRequest(why.message)), [])
            case let .success(grant):
                let id = s.nextID
                s.nextID += 1
                var sub = Subscriber(preview: grant)
                if s.liveness.live == false { sub.state = Self.stateLine(live: false, reason: s.liveness.reason) }
                s.subscribers[id] = sub
                s.generation += 1
                monitor.broadcast()
                return (.success((id, grant)), s.wakers)
            }
        }
        wake(wakers)
        return result
    }

    /// A new `levels` subscriber: it gets the windows closed from now on.
    public func subscribeLevels() -> UInt64 {
        locked { s in
            let id = s.nextID
            s.nextID += 1
            s.subscribers[id] = Subscriber(levelsSeen: s.levels.number)
            s.levelsSubscribers += 1
            return id
        }
    }

    public func unsubscribe(_ id: UInt64) {
        locked { s in
            guard let sub = s.subscribers.removeValue(forKey: id) else { return }
            if sub.preview != nil {
                s.generation += 1
                monitor.broadcast()
            } else {
                s.levelsSubscribers -= 1
            }
        }
    }

    /// The next line for subscriber `id` (a `preview_state` line first), nil when none waits.
    public func take(_ id: UInt64) -> [UInt8]? {
        enum Next { case state([UInt8]), frame(Frame, Int64, Int), levels(Levels) }
        let next: Next? = locked { s in
            guard var sub = s.subscribers[id] else { return nil }
            defer { s.subscribers[id] = sub }
            if let line = sub.state {
                sub.state = nil
                return .state(line)
            }
            if sub.preview != nil {
                return sub.frames.take().map { Next.frame($0.item, $0.seq, $0.dropped) }
            }
            guard s.levels.number > sub.levelsSeen else { return nil }
            sub.levelsSeen = s.levels.number
            return .levels(s.levels)
        }
        switch next {
        case nil: return nil
        case let .state(line)?: return line
        case let .frame(f, seq, dropped)?: return Self.frameLine(f, seq: seq, dropped: dropped)
        case let .levels(l)?: return Self.levelsLine(l)
        }
    }

    // MARK: The preview thread

    /// The preview subscribers (id, width, fps), after waiting until there is one or `deadline`
    /// passes (then possibly none), and the generation to pass to the next wait.
    public func waitForPreview(until deadline: Nanos?) -> [(id: UInt64, width: Int, fps: Int)] {
        locked { s in
            while !s.subscribers.values.contains(where: { $0.preview != nil }) {
                if !monitor.wait(until: deadline) { break }
            }
            return s.subscribers.compactMap { id, sub in sub.preview.map { (id: id, width: $0.width, fps: $0.fps) } }.sorted { $0.id < $1.id }
        }
    }

    public var previewSubscriberCount: Int { locked { s in s.subscribers.values.filter { $0.preview != nil }.count } }

    /// Offers one encoded frame to the subscribers `ids` (latest wins for each).
    public func publish(jpeg: [UInt8], width: Int, height: Int, capturedNs: Nanos, to ids: [UInt64]) {
        let at = Sys.monotonicNs()
        var tail = Array(",\"bytes\":\(jpeg.count),\"jpeg\":\"".utf8)
        tail += Array(Data(jpeg).base64EncodedString().utf8)
        tail += Array("\",\"at\":\(at)}\n".utf8)
        let frame = Frame(width: width, height: height, capturedNs: capturedNs, publishedNs: at, bytes: jpeg.count, tail: tail)
        let wakers: [@Sendable () -> Void] = locked { s in
            for id in ids { s.subscribers[id]?.frames.offer(frame) }
            return s.wakers
        }
        wake(wakers)
    }

    /// Whether the preview is live (frames flowing) or why not; each subscriber gets one line
    /// per change.
    public func setPreviewLive(_ live: Bool, reason: String?) {
        let wakers: [@Sendable () -> Void] = locked { s in
            guard s.liveness.observe(live: live, reason: reason) else { return [] }
            let line = Self.stateLine(live: live, reason: s.liveness.reason)
            for id in Array(s.subscribers.keys) where s.subscribers[id]!.preview != nil { s.subscribers[id]!.state = line }
            return s.wakers
        }
        wake(wakers)
    }

    // MARK: The audio capture thread

    /// Whether anybody subscribes to `levels` (the capture thread meters only then).
    public var wantsLevels: Bool { locked { $0.levelsSubscribers > 0 } }

    /// A closed levels window (`LevelsWindow`): copied into storage made at the first window of
    /// each channel count; no allocation after that.
    public func publishLevels(_ window: LevelsWindow) {
        let wakers: [@Sendable () -> Void] = locked { s in
            guard s.levelsSubscribers > 0 else { return [] }
            if s.levels.peak.count != window.channels {
                s.levels.peak = [Double](repeating: 0, count: window.channels)
                s.levels.rms = [Double](repeating: 0, count: window.channels)
            }
            for c in 0..<window.channels {
                s.levels.peak[c] = window.peakDbfs[c]
                s.levels.rms[c] = window.rmsDbfs[c]
            }
            s.levels.capturedNs = window.capturedNs
            s.levels.at = Sys.monotonicNs()
            s.levels.number += 1
            return s.wakers
        }
        wake(wakers)
    }

    // MARK: Lines

    static func frameLine(_ f: Frame, seq: Int64, dropped: Int) -> [UInt8] {
        var line = Array("{\"v\":\(protocolVersion),\"event\":\"preview\",\"seq\":\(seq),\"width\":\(f.width),\"height\":\(f.height),\"capturedNs\":\(f.capturedNs),\"dropped\":\(dropped)".utf8)
        line.reserveCapacity(line.count + f.tail.count)
        line += f.tail
        return line
    }

    static func stateLine(live: Bool, reason: String?) -> [UInt8] {
        var w = JSONWriter()
        w.object { o in
            o.field("v", protocolVersion)
            o.field("event", LiveLine.Kind.previewState)
            o.field("live", live)
            if !live { o.field("reason", reason ?? "no camera is open") }
            o.field("at", Sys.monotonicNs())
        }
        return w.bytes + [UInt8(ascii: "\n")]
    }

    private static func levelsLine(_ l: Levels) -> [UInt8] {
        var w = JSONWriter()
        w.object { o in
            o.field("v", protocolVersion)
            o.field("event", LiveLine.Kind.levels)
            o.key("peakDbfs")
            o.array(l.peak) { a, p in a.number(p) }
            o.key("rmsDbfs")
            o.array(l.rms) { a, p in a.number(p) }
            o.field("capturedNs", l.capturedNs)
            o.field("at", l.at)
        }
        return w.bytes + [UInt8(ascii: "\n")]
    }
}
