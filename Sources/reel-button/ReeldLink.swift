import Foundation
import Glibc
import ReelButton
import ReelControl
import ReelCore
import ReelSystem

/// What the threads tell the main loop.
enum Message: Sendable {
    case connected(RecorderState, failing: String?)
    case unreachable(String)
    case state(RecorderState)
    case error(String)
    /// A command's answer: `sentNs` when it went out, `startNs` (start) when it reached reeld,
    /// `originNs` the recording's first frame's capture instant (from the status after it).
    case replied(ButtonCommand, ok: Bool, state: RecorderState?, error: String?, eventNs: Nanos, sentNs: Nanos, repliedNs: Nanos,
                 startNs: Nanos?, originNs: Nanos?)
    /// A start's first frame, captured at `originNs`, learnt after its answer (the pipeline had
    /// not taken the frame yet when the status after the start was asked).
    case firstFrame(eventNs: Nanos, originNs: Nanos)
    case signal(Int32)
}

/// Messages for the main loop, which polls `wakeFd` beside the input device.
/// @unchecked Sendable: `items` is guarded by `monitor`; the pipe's ends are only written and read.
final class Mailbox: @unchecked Sendable {
    private let monitor = Monitor()
    private var items: [Message] = []
    let wakeFd: Int32
    private let wakeWrite: Int32

    init() throws {
        let ends = try Sys.wakePipe()
        wakeFd = ends.read
        wakeWrite = ends.write
    }

    func post(_ m: Message) {
        monitor.withLock { items.append(m) }
        Sys.wake(wakeWrite)
    }

    func takeAll() -> [Message] {
        Sys.drain(wakeFd)
        return monitor.withLock {
            defer { items = [] }
            return items
        }
    }
}

/// reel-button's two connections to reeld's control socket, each on its own thread: the event
/// stream (with `status` at every (re)connect), and the commands, sent one at a time in order.
/// Both retry while reeld is unreachable; the main loop hears of it all through the mailbox.
struct ReeldLink: Sendable {
    let socket: String
    let mailbox: Mailbox
    let log: @Sendable (String) -> Void
    /// Commands from the main loop, with the instant of the input event that caused them.
    let commands = BlockingQueue<(ButtonCommand, Nanos)>(capacity: 64)

    static let retryFirstMs: Int64 = 250
    static let retryMaxMs: Int64 = 2000
    static let replyTimeoutMs = 15_000
    static let stopTimeoutMs = 130_000

    func start() {
        NamedThread.start("button-events") { followEvents() }
        NamedThread.start("button-send") { sendCommands() }
    }

    /// Queues `command` (false when 64 are waiting already: reeld is stuck).
    func send(_ command: ButtonCommand, eventNs: Nanos) -> Bool {
        commands.offer((command, eventNs))
    }

    private func followEvents() {
        var retryMs = Self.retryFirstMs
        var lastProblem: String?
        while true {
            do {
                let stream = try ControlClient(path: socket)
                let reply = try stream.subscribe(timeoutMs: Self.replyTimeoutMs)
                guard reply.ok, reply.subscribed == true else {
                    throw SocketError(.badReply, path: socket, reply.error?.message ?? "reeld on \(socket) did not start an event stream (is it the same version as reel-button?)")
                }
                // Subscribed first, then asked: no change between the answer and the stream is missed.
                let status = try Self.status(socket)
                let failing = status.standby == "failed" ? (status.lastError ?? "a standby device failed") : nil
                mailbox.post(.connected(status.state, failing: failing))
                log("connected to reeld on \(socket): \(status.state.rawValue)\(failing.map { "; failing: \($0)" } ?? "")")
                lastProblem = nil
                retryMs = Self.retryFirstMs
                while true {
                    let line = try stream.nextLine(timeoutMs: nil)
                    guard let event = try? JSONDecoder().decode(ControlEvent.self, from: Data(line)) else { continue }
                    switch event.event {
                    case ControlEvent.Kind.state: if let s = event.state { mailbox.post(.state(s)) }
                    case ControlEvent.Kind.error: mailbox.post(.error(event.message ?? "reeld reported an error"))
                    case ControlEvent.Kind.overflow: throw SocketError(.connectionClosed, path: socket, "reel-button fell behind reeld's events")
                    default: break
                    }
                }
            } catch {
                let problem = "reeld unreachable on \(socket): \(error)"
                mailbox.post(.unreachable(problem))
                if problem != lastProblem { log("\(problem); retrying every \(Self.retryMaxMs / 1000) s at most") }
                lastProblem = problem
            }
            SystemClock.sleep(until: SystemClock.now() + retryMs * 1_000_000)  // a retry period, not synchronisation
            retryMs = min(Self.retryMaxMs, retryMs * 2)
        }
    }

    static func status(_ socket: String) throws -> StatusInfo {
        let reply = try ControlClient(path: socket).send(Request(id: 1, cmd: .status), timeoutMs: replyTimeoutMs)
        guard reply.ok, let status = reply.status else {
            throw SocketError(.badReply, path: socket, reply.error?.message ?? "reeld on \(socket) answered 'status' without one")
        }
        return status
    }

    /// The command connection is kept open and warm (a `status` every `keepAliveNs` while no
    /// press comes: reeld closes a connection idle for 30 s), so a press pays no connect.
    static let keepAliveNs: Nanos = 10_000_000_000

    private func sendCommands() {
        var client: ControlClient? = try? ControlClient(path: socket)
        // A start whose first frame's capture instant is not known yet: asked again every 50 ms
        // while no press comes, for up to 5 s (for the log only).
        var awaitingOrigin: (eventNs: Nanos, until: Nanos)?
        while true {
            let now = SystemClock.now()
            let wait = awaitingOrigin.map { _ in now + 50_000_000 } ?? now + Self.keepAliveNs
            guard let next = commands.take(until: wait) else {
                if client == nil { client = try? ControlClient(path: socket) }
                let status = client.flatMap { try? $0.send(Request(id: 1, cmd: .status), timeoutMs: Self.replyTimeoutMs) }
                if status == nil { client = nil }
                if let a = awaitingOrigin {
                    if let origin = status?.status?.originNs {
                        mailbox.post(.firstFrame(eventNs: a.eventNs, originNs: origin))
                        awaitingOrigin = nil
                    } else if SystemClock.now() > a.until || status?.status?.state == .idle {
                        awaitingOrigin = nil
                    }
                }
                continue
            }
            awaitingOrigin = nil
            let (command, eventNs) = next
            let timeoutMs = command == .stop ? Self.stopTimeoutMs : Self.replyTimeoutMs
            // A start says when the press was (its input event's own CLOCK_MONOTONIC time): with
            // standby reeld records from there, so this process's and the socket's delays cost no frame.
            let request = Request(id: 1, cmd: Command(rawValue: command.rawValue)!, timeoutMs: timeoutMs,
                                  atNs: command == .start ? eventNs : nil)
            var reply: Reply?
            var failure: String?
            let sentNs = SystemClock.now()
            // A connection reeld closed meanwhile (it restarted) is made again, once: the request
            // never reached a reeld then. After a timeout or a bad reply it is not sent again.
            for attempt in 0..<2 where reply == nil {
                do {
                    if client == nil { client = try ControlClient(path: socket) }
                    reply = try client!.send(request, timeoutMs: timeoutMs)
                } catch {
                    client = nil
                    failure = "\(command.rawValue) not sent: reeld unreachable on \(socket): \(error)"
                    let closed = (error as? SocketError).map { $0.kind == .connectionClosed || $0.kind == .io } ?? false
                    if attempt == 0, !closed { break }
                }
            }
            let repliedNs = SystemClock.now()
            var state: RecorderState?
            var originNs: Nanos?
            if let reply, reply.ok {
                state = reply.status?.state ?? (command == .start ? .recording : nil)
            }
            // reeld's own word on its state after the command settles what was believed (the
            // main loop takes it once no other command is in flight).
            if reply != nil, let c = client, let status = try? c.send(Request(id: 2, cmd: .status), timeoutMs: Self.replyTimeoutMs).status {
                state = status.state
                originNs = status.originNs
            }
            if command == .start, reply?.ok == true, originNs == nil { awaitingOrigin = (eventNs, SystemClock.now() + 5_000_000_000) }
            let error: String? = reply.map { $0.ok ? nil : ($0.error?.message ?? "reeld refused \(command.rawValue)") } ?? failure
            mailbox.post(.replied(command, ok: reply?.ok ?? false, state: state, error: error, eventNs: eventNs,
                                  sentNs: sentNs, repliedNs: repliedNs, startNs: reply?.startNs, originNs: originNs))
        }
    }
}
