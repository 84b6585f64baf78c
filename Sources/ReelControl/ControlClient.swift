import Foundation
import Glibc
import ReelSystem

/// A connection to reeld's control socket. Send requests one at a time; the connection stays
/// open for further requests until the client is released. Not for use from several threads at once.
public final class ControlClient {
    public let path: String
    private let fd: Int32
    /// Bytes received after the last reply's newline (the server never sends unasked, but be exact).
    private var pending: [UInt8] = []
    private var broken = false

    /// Longest reply line accepted (a status with very many segments is still far below this).
    public static let maxReplyBytes = 16 * 1024 * 1024
    /// How long `init` waits when the server's accept queue is full.
    public static let connectTimeoutMs = 5000

    /// Connects to the control socket at `path`; throws `SocketError` naming the path and the fix.
    public init(path: String) throws {
        self.path = path
        guard let addr = Sys.address(path) else { throw SocketError.pathTooLong(path, kind: .cannotConnect) }
        let fd: Int32
        do {
            fd = try Sys.socketUnix(nonblocking: false)
        } catch {
            throw SocketError(.cannotConnect, path: path, underlying: error, "cannot connect to \(path): \(error)")
        }
        do {
            // A blocking connect on a Unix socket waits only while the accept queue is full, and
            // SO_SNDTIMEO bounds that wait (then EAGAIN).
            try Sys.setSendTimeout(fd, ms: Self.connectTimeoutMs)
            try Sys.connect(fd, addr)
            try Sys.setNonblocking(fd)
        } catch {
            Sys.close(fd)
            throw SocketError.cannotConnect(path, error)
        }
        self.fd = fd
    }

    deinit {
        Sys.close(fd)
    }

    /// Sends `request` and waits up to `timeoutMs` for its reply (an `ok: false` reply is
    /// returned, not thrown). Throws `SocketError` when no reply can be had.
    public func send(_ request: Request, timeoutMs: Int) throws -> Reply {
        let line = try lineFor(request)
        let replyLine = try exchange(line, timeoutMs: timeoutMs)
        let reply: Reply
        do {
            reply = try JSONDecoder().decode(Reply.self, from: Data(replyLine))
        } catch {
            broken = true
            let preview = String(decoding: replyLine.prefix(200), as: UTF8.self)
            throw SocketError(.badReply, path: path,
                              "reeld on \(path) sent a reply this reelctl cannot read: \(preview) (are reeld and reelctl the same version?)")
        }
        if reply.v != protocolVersion {
            throw SocketError(.badReply, path: path,
                              "reeld on \(path) speaks protocol version \(reply.v), this client \(protocolVersion) (install matching reeld and reelctl)")
        }
        return reply
    }

    /// Sends one raw line (a `\n` is appended if missing) and returns the raw reply line without
    /// its `\n`. For tools and tests that speak the protocol by hand.
    public func exchange(_ line: [UInt8], timeoutMs: Int) throws -> [UInt8] {
        if broken {
            throw SocketError(.connectionClosed, path: path,
                              "the connection to reeld on \(path) is no longer usable (connect again)")
        }
        var out = line
        if out.last != UInt8(ascii: "\n") { out.append(UInt8(ascii: "\n")) }
        let deadline = Sys.monotonicMs() + Int64(max(0, timeoutMs))
        do {
            try writeAll(out, deadline: deadline)
        } catch let error as SocketError where error.underlying?.errno == EPIPE || error.underlying?.errno == ECONNRESET {
            // The server closed early (busy, or a line it refused): its reply may still be readable.
            broken = true
            if let reply = try? readLine(deadline: deadline) { return reply }
            throw error
        } catch {
            broken = true
            throw error
        }
        do {
            return try readLine(deadline: deadline)
        } catch {
            broken = true
            throw error
        }
    }

    /// Sends `events` and returns the reply; on `ok` and `subscribed` the connection is then an
    /// event stream: read it with `nextLine(timeoutMs:)`.
    public func subscribe(timeoutMs: Int, id: Int? = 1) throws -> Reply {
        try send(Request(id: id, cmd: .events), timeoutMs: timeoutMs)
    }

    /// The next line the server sends (without its `\n`), waiting up to `timeoutMs` (nil: no
    /// limit). For event streams. Throws `SocketError` `.connectionClosed` when reeld closes.
    public func nextLine(timeoutMs: Int?) throws -> [UInt8] {
        let deadline = timeoutMs.map { Sys.monotonicMs() + Int64(max(0, $0)) } ?? Int64.max / 2
        do {
            return try readLine(deadline: deadline)
        } catch let error as SocketError where error.kind == .timedOut {
            throw error  // the stream is still usable
        } catch {
            broken = true
            throw error
        }
    }

    private func lineFor(_ request: Request) throws -> [UInt8] {
        do {
            return try Wire.line(request)
        } catch {
            throw SocketError(.io, path: path, "cannot encode request: \(error)")
        }
    }

    private func timeLeft(_ deadline: Int64) -> Int32 {
        Int32(clamping: max(0, deadline - Sys.monotonicMs()))
    }

    /// Waits until `fd` is ready for `events` or the deadline passes.
    private func wait(_ events: Int16, deadline: Int64, doing what: String) throws {
        var fds = [pollfd(fd: fd, events: events, revents: 0)]
        let ready: Int32
        do {
            ready = try Sys.poll(&fds, timeoutMs: { timeLeft(deadline) })
        } catch {
            throw SocketError(.io, path: path, underlying: error, "\(what) reeld on \(path) failed: \(error)")
        }
        if ready == 0 {
            throw SocketError(.timedOut, path: path,
                              "no reply from reeld on \(path) in time while \(what) (is it stuck? see 'journalctl -u reeld')")
        }
    }

    private func writeAll(_ bytes: [UInt8], deadline: Int64) throws {
        var offset = 0
        while offset < bytes.count {
            let sent: Int
            do {
                sent = try Sys.send(fd, bytes, from: offset)
            } catch where error.errno == EAGAIN {
                try wait(Int16(POLLOUT), deadline: deadline, doing: "sending to")
                continue
            } catch {
                throw SocketError(.io, path: path, underlying: error, "cannot send to reeld on \(path): \(error.reason)")
            }
            offset += sent
        }
    }

    private func readLine(deadline: Int64) throws -> [UInt8] {
        var scanned = 0
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            if let nl = pending[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(pending[..<nl])
                pending.removeSubrange(...nl)
                return line
            }
            scanned = pending.count
            if pending.count > Self.maxReplyBytes {
                throw SocketError(.badReply, path: path, "reply from reeld on \(path) exceeds \(Self.maxReplyBytes) bytes")
            }
            let got: Int
            do {
                got = try Sys.recv(fd, into: &chunk)
            } catch where error.errno == EAGAIN {
                try wait(Int16(POLLIN), deadline: deadline, doing: "waiting for")
                continue
            } catch where error.errno == ECONNRESET {
                got = 0
            } catch {
                throw SocketError(.io, path: path, underlying: error, "cannot read from reeld on \(path): \(error.reason)")
            }
            if got == 0 {
                throw SocketError(.connectionClosed, path: path,
                                  "reeld closed the connection on \(path) without replying (see 'journalctl -u reeld')")
            }
            pending.append(contentsOf: chunk[..<got])
        }
    }
}
