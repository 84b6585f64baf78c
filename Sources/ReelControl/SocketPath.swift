import Glibc
import ReelSystem

/// Where the control socket is: `--socket` beats `REEL_SOCKET` beats `/run/reel/reeld.sock`.
public enum SocketPath {
    public static let defaultPath = "/run/reel/reeld.sock"
    public static let environmentVariable = "REEL_SOCKET"

    /// Empty strings count as unset.
    public static func resolve(explicit: String?, environment: [String: String]) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnv = environment[environmentVariable], !fromEnv.isEmpty { return fromEnv }
        return defaultPath
    }
}

/// A failure to set up or use the control socket, with a message naming the path and the fix.
public struct SocketError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The client could not connect (no file, refused, permission, bad path).
        case cannotConnect
        /// No reply (or no connection) within the allowed time.
        case timedOut
        /// The server closed the connection before replying.
        case connectionClosed
        /// The server sent something that is not a version-1 reply.
        case badReply
        /// The server could not create, bind or listen on its socket.
        case cannotListen
        /// Another server is already listening on the path.
        case alreadyInUse
        /// Any other I/O failure on an open connection.
        case io
    }

    public let kind: Kind
    public let path: String
    /// The failed system call, when there was one.
    public let underlying: SystemError?
    public let description: String

    public init(_ kind: Kind, path: String, underlying: SystemError? = nil, _ description: String) {
        self.kind = kind
        self.path = path
        self.underlying = underlying
        self.description = description
    }

    static let startHint = "is reeld running? start it with 'systemctl start reeld' or set \(SocketPath.environmentVariable)"

    static func cannotConnect(_ path: String, _ error: SystemError) -> SocketError {
        let why: String
        switch error.errno {
        case ENOENT:
            why = "no such file (\(startHint))"
        case ECONNREFUSED:
            why = "connection refused: the socket file exists but nothing listens on it (\(startHint))"
        case EACCES, EPERM:
            why = "permission denied (you need write access to the socket: add your user to its group, or run as root)"
        case ENOTDIR:
            why = "a path component is not a directory (check --socket or \(SocketPath.environmentVariable))"
        case ENOTSOCK:
            why = "not a socket (check --socket or \(SocketPath.environmentVariable))"
        case EAGAIN:
            return SocketError(.timedOut, path: path, underlying: error,
                               "cannot connect to \(path): reeld is not accepting connections (is it stuck? see 'journalctl -u reeld')")
        default:
            why = "\(error.reason) (\(error.call))"
        }
        return SocketError(.cannotConnect, path: path, underlying: error, "cannot connect to \(path): \(why)")
    }

    static func pathTooLong(_ path: String, kind: Kind) -> SocketError {
        SocketError(kind, path: path,
                    "socket path \(path) is too long or empty (\(path.utf8.count) bytes; Unix sockets allow 1 to \(Sys.maxPathBytes)): choose a shorter path")
    }
}
