import Foundation
import Glibc
import Logging
import ReelSystem
import Synchronization

/// What the daemon implements. Called on a thread of its own for each request (never on the
/// server's I/O thread), so it may block for seconds, e.g. `stop` waiting for the file. Requests
/// from different connections may arrive concurrently; one connection's arrive one at a time.
public protocol ControlHandler: Sendable {
    func handle(_ request: Request) -> Reply
    /// The fast path: called on the server's I/O thread before `handle`, for a reply that needs
    /// no waiting (`status` from published snapshots). It must not block: no disk, no device, no
    /// waiting on another thread beyond a brief lock. nil hands the request to `handle` on a
    /// thread of its own (the default).
    func quickReply(_ request: Request) -> Reply?
}

extension ControlHandler {
    public func quickReply(_ request: Request) -> Reply? { nil }
}

/// Serves the control protocol on a Unix stream socket.
///
/// One I/O thread polls the listening socket and all clients. A request the handler can answer
/// without blocking (`quickReply`: `status`) is answered on the I/O thread itself; any other is
/// handed to the handler on its own short-lived thread, and its reply comes back to the I/O thread, which
/// writes replies of one connection in request order. A connection has at most one request at
/// the handler at a time, so there are at most `maxClients` handler threads.
///
/// Its bounds are `ControlLimits`: the client cap (a new client at the cap takes the slot of the
/// connection idle longest, so the control group always gets in), the idle timeout and the
/// unsent reply bytes per connection; `ClientSlots` decides which connection closes when.
public final class ControlServer: Sendable {
    /// Default bound on simultaneous clients (`ControlLimits.maxClients`).
    public static let defaultMaxClients = ControlLimits.standard.maxClients

    private let listenFD: Int32
    /// A pipe whose write end wakes the I/O thread (shutdown, finished replies).
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// The socket file this server created and must remove, with its identity at creation.
    private let ownedPath: String?
    private let ownedIdentity: FileIdentity?
    private let handler: any ControlHandler
    private let logger: Logger
    private let limits: ControlLimits
    private let authorize: PeerAuthorizer?
    private let shared = Mutex(Shared())
    private let ioThreadExited = DispatchSemaphore(value: 0)

    private struct Shared {
        var started = false
        var stopRequested = false
        /// Replies finished by handler threads, waiting for the I/O thread.
        var completions: [(connection: UInt64, bytes: [UInt8])] = []
        /// Where `events` subscribers get their events from (nil: `events` is refused).
        var events: EventBus?
        /// Where `preview` and `levels` subscribers get their lines from (nil: refused).
        var live: LiveFeed?
    }

    /// Serves `events` requests from `bus`: each such connection becomes a stream of the events
    /// published there. Call before `start()`.
    public func attach(events bus: EventBus) {
        shared.withLock { $0.events = bus }
        bus.addWaker { [weak self] in self?.wakeForEvents() }
    }

    /// Serves `preview` and `levels` requests from `feed`. Call before `start()`.
    public func attach(live feed: LiveFeed) {
        shared.withLock { $0.live = feed }
        feed.addWaker { [weak self] in self?.wakeForEvents() }
    }

    private func wakeForEvents() {
        // Under the lock for the same reason as in dispatch(): the pipe may be closing.
        shared.withLock { s in
            guard !s.stopRequested else { return }
            Sys.wake(wakeWrite)
        }
    }

    /// For the I/O thread (ControlIOLoop.swift).
    var eventBus: EventBus? { shared.withLock { $0.events } }
    var liveFeed: LiveFeed? { shared.withLock { $0.live } }

    /// Creates the socket at `path`, mode 0660, and listens. A stale socket file (nothing
    /// listening) is replaced; a live one, or a non-socket file at `path`, is an error naming it.
    public convenience init(path: String, handler: any ControlHandler, logger: Logger) throws {
        try self.init(path: path, handler: handler, logger: logger, maxClients: Self.defaultMaxClients)
    }

    /// As `init(path:handler:logger:)` with a chosen client bound.
    /// `authorize`, when given, is asked about each client's credentials (SO_PEERCRED) as it
    /// connects; a refused client's requests are answered `forbidden` and it is closed.
    public convenience init(path: String, handler: any ControlHandler, logger: Logger, maxClients: Int,
                            authorize: PeerAuthorizer? = nil) throws {
        try self.init(path: path, handler: handler, logger: logger, limits: ControlLimits(maxClients: maxClients), authorize: authorize)
    }

    /// As `init(path:handler:logger:maxClients:authorize:)` with all of the server's bounds chosen.
    public init(path: String, handler: any ControlHandler, logger: Logger, limits: ControlLimits,
                authorize: PeerAuthorizer? = nil) throws {
        guard let addr = Sys.address(path) else { throw SocketError.pathTooLong(path, kind: .cannotListen) }
        let fd: Int32
        do {
            fd = try Sys.socketUnix(nonblocking: true)
        } catch {
            throw SocketError(.cannotListen, path: path, underlying: error, "cannot create the control socket for \(path): \(error)")
        }
        var identity: FileIdentity?
        do {
            try Self.bindReplacingStale(fd: fd, addr: addr, path: path, logger: logger)
            // Bound but not yet listening, so nobody can connect before the mode is right.
            do {
                try Sys.chmod(path, 0o660)
                identity = try Sys.socketIdentity(path)
                // A burst of clients must queue, not fail with EAGAIN: the kernel caps this at net.core.somaxconn.
                try Sys.listen(fd, backlog: SOMAXCONN)
            } catch {
                try? Sys.unlink(path)
                throw SocketError(.cannotListen, path: path, underlying: error, "cannot listen on \(path): \(error)")
            }
            (self.wakeRead, self.wakeWrite) = try Self.makeWakePipe(path: path)
        } catch {
            Sys.close(fd)
            if identity != nil { try? Sys.unlink(path) }
            throw error
        }
        self.listenFD = fd
        self.ownedPath = path
        self.ownedIdentity = identity
        self.handler = handler
        self.logger = logger
        self.limits = limits
        self.authorize = authorize
    }

    /// Serves an already listening socket (systemd socket activation). The socket file belongs
    /// to whoever created it and is not removed by `shutdown()`. The descriptor is made
    /// non-blocking and is closed by `shutdown()`.
    public convenience init(listeningFD: Int32, handler: any ControlHandler, logger: Logger) {
        self.init(listeningFD: listeningFD, handler: handler, logger: logger, maxClients: Self.defaultMaxClients)
    }

    public convenience init(listeningFD: Int32, handler: any ControlHandler, logger: Logger, maxClients: Int,
                            authorize: PeerAuthorizer? = nil) {
        self.init(listeningFD: listeningFD, handler: handler, logger: logger, limits: ControlLimits(maxClients: maxClients),
                  authorize: authorize)
    }

    public init(listeningFD: Int32, handler: any ControlHandler, logger: Logger, limits: ControlLimits,
                authorize: PeerAuthorizer? = nil) {
        do {
            try Sys.setNonblocking(listeningFD)
        } catch {
            logger.warning("cannot make inherited control socket \(listeningFD) non-blocking: \(error)")
        }
        self.listenFD = listeningFD
        // Without the pipe shutdown() could not wake the I/O thread; failing here means the
        // process is out of descriptors and could serve nobody anyway.
        guard let wake = try? Sys.wakePipe() else {
            fatalError("reeld: cannot create a pipe for the control server (out of file descriptors? raise LimitNOFILE)")
        }
        (self.wakeRead, self.wakeWrite) = wake
        self.ownedPath = nil
        self.ownedIdentity = nil
        self.handler = handler
        self.logger = logger
        self.limits = limits
        self.authorize = authorize
    }

    deinit {
        shutdown()
    }

    private static func makeWakePipe(path: String) throws -> (Int32, Int32) {
        do {
            return try Sys.wakePipe()
        } catch {
            throw SocketError(.cannotListen, path: path, underlying: error, "cannot serve \(path): \(error)")
        }
    }

    private static func bindReplacingStale(fd: Int32, addr: sockaddr_un, path: String, logger: Logger) throws {
        do {
            try Sys.bind(fd, addr)
            return
        } catch where error.errno == EADDRINUSE {
            // Fall through: something exists at `path`.
        } catch {
            throw bindError(path, error)
        }
        // Is it a socket, and is anybody listening on it?
        let isSocket: Bool
        do {
            isSocket = try Sys.socketIdentity(path) != nil
        } catch {
            throw bindError(path, error)
        }
        guard isSocket else {
            throw SocketError(.cannotListen, path: path,
                              "cannot listen on \(path): a file that is not a socket is in the way (remove it, or choose another path with --socket)")
        }
        if let probe = try? Sys.socketUnix(nonblocking: true) {
            defer { Sys.close(probe) }
            do {
                try Sys.connect(probe, addr)
                throw SocketError(.alreadyInUse, path: path,
                                  "cannot listen on \(path): another reeld is already listening there (stop it first, e.g. 'systemctl stop reeld', or choose another path with --socket)")
            } catch let error as SocketError {
                throw error
            } catch let error as SystemError where error.errno == EAGAIN {
                // Listening but its queue is full: alive all the same.
                throw SocketError(.alreadyInUse, path: path, underlying: error,
                                  "cannot listen on \(path): another process is listening there (stop it first, or choose another path with --socket)")
            } catch {
                // ECONNREFUSED: a stale file from a process that did not clean up.
            }
        }
        logger.notice("replacing stale control socket \(path) (nothing was listening on it)")
        do {
            try Sys.unlink(path)
            try Sys.bind(fd, addr)
        } catch {
            throw bindError(path, error)
        }
    }

    private static func bindError(_ path: String, _ error: SystemError) -> SocketError {
        let directory = (path as NSString).deletingLastPathComponent
        let fix: String
        switch error.errno {
        case ENOENT: fix = "the directory \(directory) does not exist (create it, e.g. with RuntimeDirectory=reel in the unit)"
        case EACCES, EPERM: fix = "permission denied (reeld needs write access to \(directory))"
        case EROFS: fix = "read-only file system (choose another path with --socket)"
        default: fix = "\(error.reason) (\(error.call))"
        }
        return SocketError(.cannotListen, path: path, underlying: error, "cannot listen on \(path): \(fix)")
    }

    // MARK: - Lifecycle

    /// Starts serving on a thread of its own and returns at once. Calling it again does nothing.
    public func start() {
        let (go, stopped) = shared.withLock { s -> (Bool, Bool) in
            if s.started || s.stopRequested { return (false, s.stopRequested) }
            s.started = true
            return (true, false)
        }
        if stopped { logger.warning("control server: start() after shutdown() ignored") }
        guard go else { return }
        NamedThread.start("reel-control-io") { [self] in
            runIOLoop()
            ioThreadExited.signal()
        }
        logger.info("control socket ready", metadata: ["path": "\(ownedPath ?? "fd \(listenFD)")"])
    }

    /// Stops accepting, closes all client connections, closes the listening socket and removes
    /// the socket file this server created. Requests already at the handler run to completion;
    /// their replies are dropped. Idempotent; returns once the I/O thread has stopped.
    public func shutdown() {
        let (wasStarted, first) = shared.withLock { s -> (Bool, Bool) in
            defer { s.stopRequested = true }
            return (s.started, !s.stopRequested)
        }
        guard first else { return }
        if wasStarted {
            Sys.wake(wakeWrite)
            ioThreadExited.wait()
        }
        shared.withLock { $0.completions = [] }
        Sys.close(listenFD)
        Sys.close(wakeRead)
        Sys.close(wakeWrite)
        if let ownedPath {
            // Remove the file only if it is still ours (a newer reeld may have replaced it).
            if let now = try? Sys.socketIdentity(ownedPath), now == ownedIdentity {
                try? Sys.unlink(ownedPath)
            }
        }
        logger.info("control socket closed", metadata: ["path": "\(ownedPath ?? "fd \(listenFD)")"])
    }

    // MARK: - Between handler threads and the I/O thread
    // Internal, not fileprivate, only so that the I/O thread (ControlIOLoop.swift) reaches them.

    func dispatch(_ request: Request, connection: UInt64) {
        let handler = self.handler
        NamedThread.start("reel-request") { [self] in
            var reply = handler.handle(request)
            reply.v = protocolVersion
            reply.id = request.id
            let bytes = Self.encode(reply, logger: logger)
            // Wake under the lock: shutdown() sets stopRequested under it before closing the pipe,
            // so the descriptor cannot be closed (and its number reused) while this writes to it.
            shared.withLock { s in
                guard !s.stopRequested else { return }
                s.completions.append((connection, bytes))
                Sys.wake(wakeWrite)
            }
        }
    }

    /// The handler's non-blocking answer, stamped like a dispatched one; nil: dispatch it.
    func quickReply(_ request: Request) -> Reply? {
        guard var reply = handler.quickReply(request) else { return nil }
        reply.v = protocolVersion
        reply.id = request.id
        return reply
    }

    func takeCompletions() -> (stop: Bool, completions: [(connection: UInt64, bytes: [UInt8])]) {
        shared.withLock { s in
            defer { s.completions = [] }
            return (s.stopRequested, s.completions)
        }
    }

    static func encode(_ reply: Reply, logger: Logger) -> [UInt8] {
        do {
            return try Wire.line(reply)
        } catch {
            logger.error("cannot encode a reply: \(error)")
            let fallback = Reply.failure(.failed("reeld could not encode its reply (a bug; see its log)"), id: reply.id)
            return (try? Wire.line(fallback)) ?? Array("{\"v\":1,\"ok\":false}\n".utf8)
        }
    }

    var listeningFD: Int32 { listenFD }
    var wakeupFD: Int32 { wakeRead }
    var clientLimit: Int { limits.maxClients }
    var bounds: ControlLimits { limits }
    var authorizer: PeerAuthorizer? { authorize }
    var log: Logger { logger }
}
