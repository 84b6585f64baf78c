import Foundation
import ReelControl
import ReelCore

/// reel-web's requests to reeld: one control-socket connection per request (as reelctl makes),
/// each on the blocking pool, never on an event loop.
public struct ReeldLink: Sendable {
    public let socketPath: String
    let pool: BlockingPool

    /// How long a request waits for reeld: `stop` finishes the file (as reelctl's 60 s), the rest 15 s.
    static func timeoutMs(_ cmd: Command) -> Int { cmd == .stop ? 60_000 : 15_000 }

    public init(socketPath: String, pool: BlockingPool) {
        self.socketPath = socketPath
        self.pool = pool
    }

    /// reeld's status object as `reelctl status --json` prints it, or why it could not be had.
    public func status() async -> Result<String, ReeldUnreachable> {
        await pool.runResult { [socketPath] in try Self.statusNow(socketPath: socketPath) }
    }

    /// The same, from the calling thread (a subscription's own).
    static func statusNow(socketPath: String) throws -> String {
        let client = try ControlClient(path: socketPath)
        let reply = try client.send(Request(id: 1, cmd: .status), timeoutMs: timeoutMs(.status))
        guard reply.ok, let status = reply.status else {
            throw ReeldUnreachable(message: reply.error?.message ?? "reeld on \(socketPath) replied to 'status' without a status (is it the same version as reel-web?)")
        }
        return try Wire.text(status)
    }

    /// Sends `request` and gives reeld's reply line as it came, with the HTTP status it maps to.
    public func perform(_ request: Request) async -> CommandOutcome {
        var request = request
        request.timeoutMs = request.timeoutMs ?? Self.timeoutMs(request.cmd)
        let sent = request
        let result = await pool.runResult { [socketPath] () throws -> [UInt8] in
            let client = try ControlClient(path: socketPath)
            return try client.exchange(try Wire.line(sent), timeoutMs: (sent.timeoutMs ?? 15_000) + 5_000)
        }
        switch result {
        case let .success(line): return CommandOutcome(replyLine: line)
        case let .failure(why): return CommandOutcome(unreachable: why.message)
        }
    }
}

/// reeld could not be asked (not running, socket refused, no reply in time).
public struct ReeldUnreachable: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

extension BlockingPool {
    /// `run`, with every failure as `ReeldUnreachable` carrying its words.
    func runResult<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async -> Result<T, ReeldUnreachable> {
        do {
            return .success(try await run(body))
        } catch let error as ReeldUnreachable {
            return .failure(error)
        } catch {
            return .failure(ReeldUnreachable(message: "\(error)"))
        }
    }
}

/// A command's answer to the browser: reeld's reply line, and 200 (ok), 409 (refused: wrong
/// state, bad request, busy) or 502 (reeld not reached, or a reply that is not one).
public struct CommandOutcome: Sendable, Equatable {
    public let httpStatus: Int
    public let body: [UInt8]

    public init(replyLine: [UInt8]) {
        if let reply = try? JSONDecoder().decode(Reply.self, from: Data(replyLine)) {
            httpStatus = reply.ok ? 200 : 409
            body = replyLine
        } else {
            httpStatus = 502
            body = Self.failure("reeld sent a reply reel-web cannot read: \(String(decoding: replyLine.prefix(200), as: UTF8.self)) (are reeld and reel-web the same version?)")
        }
    }

    public init(unreachable message: String) {
        httpStatus = 502
        body = Self.failure(message)
    }

    static func failure(_ message: String) -> [UInt8] { refusal(.failed(message)) }

    /// A refusal of reel-web's own, in a reply's shape.
    static func refusal(_ error: ControlError) -> [UInt8] {
        Array(((try? Wire.text(Reply.failure(error))) ?? #"{"v":1,"ok":false}"#).utf8)
    }
}
