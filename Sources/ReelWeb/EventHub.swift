import Foundation
import Logging
import ReelControl
import ReelCore
import ReelSystem

/// `GET /api/events`' source: ONE reeld `events` subscription and ONE `levels` subscription for
/// all the browsers, held while at least one browser listens. Each reeld event goes out as
/// `event: reel`, followed by a fresh status (`event: status`); levels as `event: levels`; while
/// reeld cannot be reached, `event: down`. Messages are ready-made SSE text.
/// @unchecked Sendable: `events`, `levels` and `down` are guarded by `lock`; the fan-out locks itself.
public final class EventHub: @unchecked Sendable {
    /// SSE messages a slow browser may have waiting before it loses the oldest.
    static let keep = 64
    static let pingNs: Nanos = 15 * nanosPerSecond

    private let socketPath: String
    private let logger: Logger
    private let fanout = Fanout<String>(keep: keep)
    private let lock = Monitor()
    private var events: ReeldSubscription?
    private var levels: ReeldSubscription?
    private var down: String?

    public init(socketPath: String, logger: Logger) {
        self.socketPath = socketPath
        self.logger = logger
        // The comment ping every 15 s, for as long as reel-web runs (one hub per process).
        NamedThread.start("web-ping") { [fanout] in
            let clock = Monitor()
            while true {
                clock.withLock { _ = clock.wait(until: SystemClock.now() + Self.pingNs) }
                fanout.send(SSE.comment("ping"))
            }
        }
    }

    /// A new browser: its id and its stream of SSE messages (starting with reeld's state as it
    /// is now: `down` if reeld cannot be reached; the caller sends the first status).
    public func listen() -> (id: Int, stream: AsyncStream<String>, down: String?) {
        let (id, stream) = fanout.add(whenFirst: startSubscriptions)
        return (id, stream, lock.withLock { down })
    }

    public func leave(_ id: Int) {
        fanout.remove(id, whenLast: stopSubscriptions)
    }

    public var listeners: Int { fanout.count }

    /// Ends every browser's stream (shutdown).
    public func endAll() { fanout.finishAll() }

    private func startSubscriptions() {
        lock.withLock {
            events = ReeldSubscription(name: "web-events", socketPath: socketPath,
                                       requestLine: Array(#"{"v":1,"id":1,"cmd":"events"}"#.utf8)) { [weak self] in self?.onEvents($0) }
            levels = ReeldSubscription(name: "web-levels", socketPath: socketPath,
                                       requestLine: Array(#"{"v":1,"id":1,"cmd":"levels"}"#.utf8)) { [weak self] in self?.onLevels($0) }
        }
    }

    private func stopSubscriptions() {
        lock.withLock {
            events?.stop(); levels?.stop()
            events = nil; levels = nil
        }
    }

    /// On the events subscription's thread.
    private func onEvents(_ event: ReeldSubscription.Event) {
        switch event {
        case .up:
            let wasDown = lock.withLock { () -> String? in defer { down = nil }; return down }
            if wasDown != nil { logger.info("reeld is back on \(socketPath)") }
            sendStatus()
        case let .line(line):
            fanout.send(SSE.message(event: "reel", data: String(decoding: line, as: UTF8.self)))
            sendStatus()
        case let .down(message):
            let first = lock.withLock { () -> Bool in defer { down = message }; return down == nil }
            if first { logger.warning("reeld cannot be reached: \(message)") }
            fanout.send(SSE.down(message))
        case let .refused(error):
            logger.error("reeld refused the events subscription: \(error.message)")
            fanout.send(SSE.down(error.message))
        }
    }

    private func sendStatus() {
        do {
            fanout.send(SSE.message(event: "status", data: try ReeldLink.statusNow(socketPath: socketPath)))
        } catch {
            fanout.send(SSE.down("\(error)"))
        }
    }

    /// On the levels subscription's thread.
    private func onLevels(_ event: ReeldSubscription.Event) {
        switch event {
        case let .line(line):
            if let data = SSE.levelsData(line) { fanout.send(SSE.message(event: "levels", data: data)) }
        case let .refused(error):
            // A reeld without levels (an older version): the page shows no meters.
            logger.notice("reeld refused the levels subscription: \(error.message)")
        case .up, .down:
            break  // the events subscription reports reeld's comings and goings
        }
    }
}

/// Server-sent events text (the WHATWG HTML standard's event stream format).
public enum SSE {
    /// `event: NAME` and one `data:` line per line of `data`, then the blank line.
    public static func message(event: String, data: String) -> String {
        var out = "event: \(event)\n"
        for line in data.split(separator: "\n", omittingEmptySubsequences: false) {
            out += "data: \(line.replacingOccurrences(of: "\r", with: ""))\n"
        }
        return out + "\n"
    }

    /// A comment line (ignored by browsers; keeps proxies and the connection awake).
    public static func comment(_ text: String) -> String { ": \(text)\n\n" }

    public static func down(_ message: String) -> String {
        struct Down: Encodable { let message: String }
        let data = (try? Wire.text(Down(message: message))) ?? #"{"message":"reeld cannot be reached"}"#
        return Self.message(event: "down", data: data)
    }

    /// A reeld `levels` line as the page gets it: `{"peakDbfs":[..],"rmsDbfs":[..],"capturedNs":..}`.
    public static func levelsData(_ line: [UInt8]) -> String? {
        struct Levels: Codable { let peakDbfs: [Double]; let rmsDbfs: [Double]; let capturedNs: Int64 }
        guard let levels = try? JSONDecoder().decode(Levels.self, from: Data(line)) else { return nil }
        func list(_ values: [Double]) -> String {
            "[" + values.map { String(format: "%.1f", $0.isFinite ? max(-120, $0) : -120) }.joined(separator: ",") + "]"
        }
        return #"{"peakDbfs":\#(list(levels.peakDbfs)),"rmsDbfs":\#(list(levels.rmsDbfs)),"capturedNs":\#(levels.capturedNs)}"#
    }
}
