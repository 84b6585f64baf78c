import Glibc
import Logging
import ReelSystem

// The control server's I/O thread: `IOLoop` polls the wake pipe, the listening socket and every
// client `Connection`; it admits clients (`ClientSlots` decides who gives way), frames request lines,
// answers or dispatches them, writes replies in request order and streams events.

extension ControlServer {
    /// The I/O thread's body (`start()`): serves until `shutdown()`.
    func runIOLoop() { IOLoop(server: self).run() }
}

// MARK: - The I/O thread

/// One client connection; owned by the I/O thread only.
private final class Connection {
    let id: UInt64
    let fd: Int32
    var input: [UInt8] = []
    /// Bytes of `input` already searched for a newline.
    var scanned = 0
    var lines: [[UInt8]] = []
    var lineTooLong = false
    var inFlight = false
    var output: [UInt8] = []
    var outputOffset = 0
    /// The client shut down its sending side: answer what was asked, then close.
    var endOfInput = false
    var closeWhenFlushed = false
    var requests = 0
    /// Malformed requests: logged once, when the connection closes, so a hostile client cannot
    /// flood the journal.
    var malformed = 0
    /// Set when the peer failed the credentials check: every request is answered with this.
    var forbidden: String?
    /// The event-bus subscription once the client sent `events`: the connection is then a
    /// stream; further input is read (to notice the client leaving) and discarded.
    var subscription: UInt64?
    /// The `LiveFeed` subscription once the client sent `preview` or `levels`: a stream too.
    var feed: UInt64?
    var isStream: Bool { subscription != nil || feed != nil }
    /// Its requests wait because its replies are unsent over the cap (logged once).
    var heldForUnread = false

    init(id: UInt64, fd: Int32) {
        self.id = id
        self.fd = fd
    }

    var hasOutput: Bool { outputOffset < output.count }
    var unsent: Int { output.count - outputOffset }
}

private final class IOLoop {
    let server: ControlServer
    let logger: Logger
    let eventBus: EventBus?
    let liveFeed: LiveFeed?
    var connections: [UInt64: Connection] = [:]
    var nextID: UInt64 = 1
    var acceptPausedUntilMs: Int64 = 0
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    /// Which connection closes when (idle timeout, a slot for a new client at the cap).
    var slots: ClientSlots
    /// When the cap last made the server close a connection for a new one (logged once a minute).
    var lastFullWarningMs: Int64?

    /// Lines queued per connection before the server stops reading from it (pipelining bound).
    static let maxQueuedLines = 32

    init(server: ControlServer) {
        self.server = server
        self.logger = server.log
        self.eventBus = server.eventBus
        self.liveFeed = server.liveFeed
        self.slots = ClientSlots(limits: server.bounds)
    }

    func run() {
        var fds: [pollfd] = []
        var order: [Connection] = []
        while true {
            fds.removeAll(keepingCapacity: true)
            order.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: server.wakeupFD, events: Int16(POLLIN), revents: 0))
            let acceptPaused = Sys.monotonicMs() < acceptPausedUntilMs
            fds.append(pollfd(fd: acceptPaused ? -1 : server.listeningFD, events: Int16(POLLIN), revents: 0))
            for conn in connections.values {
                var events: Int16 = 0
                if wantsInput(conn) { events |= Int16(POLLIN) }
                if conn.hasOutput { events |= Int16(POLLOUT) }
                // Polled even with no events so a hang-up (POLLHUP) is seen at once.
                fds.append(pollfd(fd: conn.fd, events: events, revents: 0))
                order.append(conn)
            }
            let wakeAt = [acceptPaused ? acceptPausedUntilMs : nil, slots.nextDeadlineMs()].compactMap { $0 }.min()
            do {
                _ = try Sys.poll(&fds) { () -> Int32 in
                    wakeAt.map { Int32(clamping: max(1, $0 - Sys.monotonicMs())) } ?? -1
                }
            } catch {
                logger.critical("control server poll failed: \(error); the control socket stops serving")
                break
            }

            if fds[0].revents != 0 {
                Sys.drain(server.wakeupFD)
            }
            let (stop, completions) = server.takeCompletions()
            if stop { break }
            for (id, bytes) in completions {
                guard let conn = connections[id] else {
                    logger.debug("dropping a reply: its client has left", metadata: ["conn": "\(id)"])
                    continue
                }
                conn.inFlight = false
                slots.setBusy(id, false, nowMs: Sys.monotonicMs())
                append(bytes, to: conn)
                advance(conn)
            }
            if fds[1].revents != 0 { acceptAll() }
            for (index, conn) in order.enumerated() {
                let revents = Int32(fds[index + 2].revents)
                guard revents != 0, connections[conn.id] != nil else { continue }
                if revents & (POLLHUP | POLLERR | POLLNVAL) != 0 {
                    // The peer is gone entirely: nobody can read replies any more.
                    close(conn, why: "client hung up")
                    continue
                }
                if revents & POLLIN != 0 { readInput(conn) }
                if connections[conn.id] != nil, revents & POLLOUT != 0 { flush(conn) }
                if connections[conn.id] != nil { advance(conn) }
            }
            if eventBus != nil {
                for conn in Array(connections.values) where conn.subscription != nil { pumpEvents(conn) }
            }
            if liveFeed != nil {
                for conn in Array(connections.values) where conn.feed != nil { pumpFeed(conn) }
            }
            closeIdle()
        }
        for conn in connections.values { Sys.close(conn.fd) }
        connections.removeAll()
    }

    /// Unsent bytes above which a subscriber's events wait in the bus (where they are bounded).
    static let maxStreamBacklog = 64 * 1024

    /// Moves queued events of a subscribed connection to its output; closes it after an overflow.
    func pumpEvents(_ conn: Connection) {
        guard let sub = conn.subscription, let bus = eventBus,
              conn.output.count - conn.outputOffset < Self.maxStreamBacklog else { return }
        let (lines, ended) = bus.take(sub)
        for line in lines { append(line, to: conn) }
        if ended {
            logger.info("dropping an event subscriber: it fell behind by \(bus.capacity) events", metadata: ["conn": "\(conn.id)"])
            conn.subscription = nil
            conn.closeWhenFlushed = true
        }
        guard !lines.isEmpty || ended else { return }
        flush(conn)
        if connections[conn.id] != nil, conn.closeWhenFlushed, !conn.hasOutput, !conn.inFlight {
            close(conn, why: "event subscriber fell behind")
        }
    }

    /// Moves the next waiting line of a `preview` or `levels` subscriber to its output, only once
    /// everything before it is written: a reader that does not keep up loses lines in the feed
    /// (latest wins), never holds a backlog here.
    func pumpFeed(_ conn: Connection) {
        guard let id = conn.feed, let feed = liveFeed else { return }
        while !conn.hasOutput, connections[conn.id] != nil, let line = feed.take(id) {
            append(line, to: conn)
            flush(conn)
        }
    }

    func wantsInput(_ conn: Connection) -> Bool {
        !conn.endOfInput && !conn.lineTooLong && !conn.closeWhenFlushed
            && conn.lines.count < Self.maxQueuedLines && conn.unsent < server.bounds.maxUnsentReplyBytes
    }

    /// Closes the connections `slots` says have been idle too long.
    func closeIdle() {
        let now = Sys.monotonicMs()
        for id in slots.expired(nowMs: now) {
            guard let conn = connections[id] else { continue }
            let idle = slots.idleMs(id, nowMs: now)
            let span = idle < 10_000 ? "\(idle) ms" : "\(idle / 1000) s"
            if conn.hasOutput {
                // Replies are lost here: worth a line at the default level.
                logger.info("closing a control client that has not read its replies for \(span) (\(conn.unsent) bytes unsent)",
                            metadata: ["conn": "\(id)"])
                close(conn, why: "not reading its replies")
            } else {
                close(conn, why: "idle for \(span)")
            }
        }
    }

    /// At the cap: makes room for a new client as `slots` says. False: every slot is busy.
    func makeRoom() -> Bool {
        // Clients that already hung up but were not reaped yet (a busy loop) hold no real slot.
        if slots.isFull { reapHungUp() }
        switch slots.admission() {
        case .admit:
            return true
        case .refuse:
            return false
        case .evict(let id):
            let now = Sys.monotonicMs()
            if lastFullWarningMs.map({ now - $0 >= 60_000 }) ?? true {
                lastFullWarningMs = now
                logger.warning("serving \(server.clientLimit) control clients, the most: a new client takes the slot of the one idle longest (logged once a minute)")
            }
            if let victim = connections[id] {
                close(victim, why: "idle for \(slots.idleMs(id, nowMs: now)) ms, its slot given to a new client")
            } else {
                slots.remove(id)
            }
            return true
        }
    }

    func acceptAll() {
        while true {
            let fd: Int32
            do {
                fd = try Sys.accept(server.listeningFD)
            } catch where error.errno == EAGAIN || error.errno == ECONNABORTED {
                return
            } catch where error.errno == EMFILE || error.errno == ENFILE || error.errno == ENOBUFS || error.errno == ENOMEM {
                logger.error("cannot accept control clients: \(error.reason); pausing accept for 100 ms")
                acceptPausedUntilMs = Sys.monotonicMs() + 100
                return
            } catch {
                logger.error("cannot accept a control client: \(error)")
                return
            }
            guard makeRoom() else {
                refuseBusy(fd)
                continue
            }
            let conn = Connection(id: nextID, fd: fd)
            nextID += 1
            connections[conn.id] = conn
            logger.debug("control client connected", metadata: ["conn": "\(conn.id)"])
            if let authorize = server.authorizer {
                do {
                    let peer = try Sys.peerCredentials(fd)
                    if let refusal = authorize(peer) {
                        logger.warning("refusing control client \(peer): \(refusal)", metadata: ["conn": "\(conn.id)"])
                        conn.forbidden = refusal
                    }
                } catch {
                    logger.error("refusing a control client: cannot read its credentials: \(error)", metadata: ["conn": "\(conn.id)"])
                    conn.forbidden = "reeld cannot tell who you are (\(error)); connect over its Unix socket"
                }
            }
            slots.add(conn.id, nowMs: Sys.monotonicMs(), forbidden: conn.forbidden != nil)
        }
    }

    /// Closes every connection whose peer has hung up, with one zero-timeout poll.
    func reapHungUp() {
        let conns = Array(connections.values)
        var fds = conns.map { pollfd(fd: $0.fd, events: 0, revents: 0) }
        guard (try? Sys.poll(&fds, timeoutMs: { 0 })) != nil else { return }
        for (conn, p) in zip(conns, fds) where Int32(p.revents) & (POLLHUP | POLLERR | POLLNVAL) != 0 {
            close(conn, why: "client hung up")
        }
    }

    func refuseBusy(_ fd: Int32) {
        logger.warning("refusing a control client: already serving \(server.clientLimit) clients, each with a request under way")
        let reply = Reply.failure(.busy(
            "reeld is already serving \(server.clientLimit) control clients, its maximum, each with a request under way; try again shortly"))
        let bytes = ControlServer.encode(reply, logger: logger)
        // Best effort: a fresh socket's buffer takes this short line; if not, the client sees a close.
        _ = try? Sys.send(fd, bytes)
        Sys.close(fd)
    }

    func readInput(_ conn: Connection) {
        let got: Int
        do {
            got = try Sys.recv(conn.fd, into: &scratch)
        } catch where error.errno == EAGAIN {
            return
        } catch {
            close(conn, why: "read failed: \(error.reason)")
            return
        }
        slots.progress(conn.id, nowMs: Sys.monotonicMs())
        if got == 0 {
            conn.endOfInput = true
            if !conn.input.isEmpty {
                logger.debug("control client ended mid-line; discarding \(conn.input.count) bytes", metadata: ["conn": "\(conn.id)"])
                conn.input.removeAll()
                conn.scanned = 0
            }
            return
        }
        if conn.isStream { return }  // a stream: input is ignored
        conn.input.append(contentsOf: scratch[..<got])
        splitLines(conn)
    }

    func splitLines(_ conn: Connection) {
        var start = 0
        var searchFrom = conn.scanned
        while let nl = conn.input[searchFrom...].firstIndex(of: UInt8(ascii: "\n")) {
            if nl - start > Wire.maxLineBytes {
                markTooLong(conn)
                return
            }
            conn.lines.append(Array(conn.input[start..<nl]))
            start = nl + 1
            searchFrom = start
        }
        if start > 0 { conn.input.removeSubrange(..<start) }
        conn.scanned = conn.input.count
        if conn.input.count > Wire.maxLineBytes { markTooLong(conn) }
    }

    func markTooLong(_ conn: Connection) {
        conn.lineTooLong = true
        conn.input = []
        conn.scanned = 0
    }

    /// Moves the connection on: hands the next queued line to the handler, answers bad lines
    /// directly, writes what is ready, and closes when done.
    func advance(_ conn: Connection) {
        while !conn.inFlight, !conn.closeWhenFlushed {
            if conn.isStream {
                conn.lines.removeAll()  // a stream: requests after `events`, `preview`, `levels` are ignored
                break
            }
            if conn.unsent >= server.bounds.maxUnsentReplyBytes {
                flush(conn)  // the client may be reading: what it takes now counts
                guard connections[conn.id] != nil else { return }
            }
            if conn.unsent >= server.bounds.maxUnsentReplyBytes {
                // The client does not read: take no further request (nor input) until it does, so
                // its replies cannot pile up here. The idle timeout closes it if it never reads.
                if !conn.heldForUnread, !conn.lines.isEmpty {
                    conn.heldForUnread = true
                    logger.info("control client is not reading its replies: \(conn.unsent) bytes unsent; its further requests wait until it reads",
                                metadata: ["conn": "\(conn.id)"])
                }
                break
            }
            if !conn.lines.isEmpty {
                let line = conn.lines.removeFirst()
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0d }) { continue }  // blank: ignored
                conn.requests += 1
                if let refusal = conn.forbidden {
                    // Answer (never hang), then close; the handler never sees the request.
                    let id: Int? = switch Wire.parseRequest(line) {
                    case .success(let r): r.id
                    case .failure(let p): p.id
                    }
                    append(ControlServer.encode(.failure(.forbidden(refusal), id: id), logger: logger), to: conn)
                    conn.closeWhenFlushed = true
                    continue
                }
                switch Wire.parseRequest(line) {
                case .success(let request) where request.cmd == .events:
                    subscribe(conn, request)
                case .success(let request) where request.cmd == .preview || request.cmd == .levels:
                    subscribeLive(conn, request)
                case .success(let request):
                    logger.debug("control request", metadata: ["conn": "\(conn.id)", "cmd": "\(request.cmd.rawValue)"])
                    if let reply = server.quickReply(request) {
                        // Answered here, in order: this connection has nothing in flight.
                        append(ControlServer.encode(reply, logger: logger), to: conn)
                        continue
                    }
                    conn.inFlight = true
                    slots.setBusy(conn.id, true, nowMs: Sys.monotonicMs())
                    server.dispatch(request, connection: conn.id)
                case .failure(let problem):
                    conn.malformed += 1
                    logger.debug("bad control request: \(problem.error.message)", metadata: ["conn": "\(conn.id)"])
                    append(ControlServer.encode(.failure(problem.error, id: problem.id), logger: logger), to: conn)
                }
            } else if conn.lineTooLong {
                logger.info("control request line too long; closing", metadata: ["conn": "\(conn.id)"])
                let error = ControlError.badRequest(
                    "request line longer than \(Wire.maxLineBytes) bytes; closing the connection (send one JSON object per line)")
                append(ControlServer.encode(.failure(error), logger: logger), to: conn)
                conn.closeWhenFlushed = true
            } else {
                if conn.endOfInput { conn.closeWhenFlushed = true }
                break
            }
        }
        flush(conn)
        if connections[conn.id] != nil, conn.closeWhenFlushed, !conn.hasOutput, !conn.inFlight {
            close(conn, why: conn.lineTooLong ? "line too long" : "client finished")
        }
    }

    /// `events`: answers `subscribed` and makes the connection a stream of the bus's events.
    func subscribe(_ conn: Connection, _ request: Request) {
        guard let bus = eventBus else {
            let error = ControlError.failed("this reeld serves no event stream (a server without an event bus; upgrade reeld)")
            append(ControlServer.encode(.failure(error, id: request.id), logger: logger), to: conn)
            return
        }
        conn.subscription = bus.subscribe()
        slots.subscribed(conn.id)
        logger.debug("event subscriber", metadata: ["conn": "\(conn.id)"])
        var reply = Reply(ok: true, subscribed: true)
        reply.id = request.id
        append(ControlServer.encode(reply, logger: logger), to: conn)
    }

    /// `preview` and `levels`: answers `subscribed` (a preview: with its grant) and makes the
    /// connection a stream of the live feed; out of range is `bad_request`, a 9th preview `busy`.
    func subscribeLive(_ conn: Connection, _ request: Request) {
        guard let feed = liveFeed else {
            let error = ControlError.failed("this reeld serves no preview or levels (a server without a live feed; upgrade reeld)")
            append(ControlServer.encode(.failure(error, id: request.id), logger: logger), to: conn)
            return
        }
        var reply = Reply(ok: true, subscribed: true)
        reply.id = request.id
        if request.cmd == .preview {
            switch feed.subscribePreview(width: request.width, fps: request.fps) {
            case let .failure(.busy(why)):
                logger.info("refusing a preview subscriber: \(why)", metadata: ["conn": "\(conn.id)"])
                append(ControlServer.encode(.failure(.busy(why), id: request.id), logger: logger), to: conn)
                return
            case let .failure(.badRequest(why)):
                append(ControlServer.encode(.failure(.badRequest(why), id: request.id), logger: logger), to: conn)
                return
            case let .success(sub):
                conn.feed = sub.id
                reply.preview = PreviewInfo(width: sub.grant.width, height: sub.grant.height, fps: sub.grant.fps)
            }
        } else {
            conn.feed = feed.subscribeLevels()
        }
        slots.subscribed(conn.id)
        logger.debug("\(request.cmd.rawValue) subscriber", metadata: ["conn": "\(conn.id)"])
        append(ControlServer.encode(reply, logger: logger), to: conn)
    }

    func append(_ bytes: [UInt8], to conn: Connection) {
        if conn.outputOffset == conn.output.count {
            conn.output.removeAll(keepingCapacity: true)
            conn.outputOffset = 0
        }
        conn.output.append(contentsOf: bytes)
    }

    func flush(_ conn: Connection) {
        while conn.hasOutput {
            let sent: Int
            do {
                sent = try Sys.send(conn.fd, conn.output, from: conn.outputOffset)
            } catch where error.errno == EAGAIN {
                return  // POLLOUT will bring us back
            } catch {
                // EPIPE / ECONNRESET: the client vanished; MSG_NOSIGNAL kept SIGPIPE away.
                close(conn, why: "client went away before its reply was written (\(error.reason))")
                return
            }
            conn.outputOffset += sent
            if sent > 0 { slots.progress(conn.id, nowMs: Sys.monotonicMs()) }
        }
        conn.output.removeAll(keepingCapacity: true)
        conn.outputOffset = 0
    }

    func close(_ conn: Connection, why: String) {
        guard connections.removeValue(forKey: conn.id) != nil else { return }
        slots.remove(conn.id)
        Sys.close(conn.fd)
        if let sub = conn.subscription { eventBus?.unsubscribe(sub) }
        if let sub = conn.feed { liveFeed?.unsubscribe(sub) }
        if conn.malformed > 0 {
            logger.info("a control client sent \(conn.malformed) malformed request(s) of \(conn.requests); each was answered with bad_request",
                        metadata: ["conn": "\(conn.id)"])
        }
        logger.debug("control client closed: \(why)",
                     metadata: ["conn": "\(conn.id)", "requests": "\(conn.requests)", "inFlight": "\(conn.inFlight)"])
    }
}
