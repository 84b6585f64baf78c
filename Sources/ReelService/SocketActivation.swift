import Glibc
import ReelSystem

/// systemd socket activation (sd_listen_fds): the listening sockets passed from fd 3 on, with
/// `LISTEN_PID` (must be this process), `LISTEN_FDS` (how many) and `LISTEN_FDNAMES`
/// (colon-separated names, from FileDescriptorName=).
public enum SocketActivation {
    public static let firstFD: Int32 = 3

    public struct Passed: Sendable, Equatable {
        public var fd: Int32
        public var name: String?
    }

    public enum Failure: Error, CustomStringConvertible, Sendable {
        case badCount(String)
        case notAListeningUnixSocket(fd: Int32, why: String)
        case tooMany(Int, names: [String])

        public var description: String {
            switch self {
            case let .badCount(v):
                return "LISTEN_FDS='\(v)' is not a positive number (the service manager's socket activation is broken; start reeld without LISTEN_FDS to let it create its socket)"
            case let .notAListeningUnixSocket(fd, why):
                return "inherited fd \(fd) is not a listening Unix stream socket (\(why)): check ListenStream= in reeld.socket"
            case let .tooMany(n, names):
                return "\(n) sockets passed by the service manager (\(names.joined(separator: ", "))) but none is named 'control': give reeld.socket exactly one ListenStream= or FileDescriptorName=control"
            }
        }
    }

    /// The control socket passed to this process, or nil when none was (not socket-activated,
    /// or the variables are meant for another process). Unsets the variables either way, as
    /// sd_listen_fds(1) does, so children (the on_finish hook) do not inherit them.
    public static func controlSocket(environment: [String: String], pid: pid_t = getpid(), unset: Bool = true) throws(Failure) -> Passed? {
        defer {
            if unset { for v in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { Glibc.unsetenv(v) } }
        }
        guard let pidText = environment["LISTEN_PID"], let forPid = Int32(pidText), forPid == pid else { return nil }
        guard let countText = environment["LISTEN_FDS"] else { return nil }
        guard let count = Int32(countText), count > 0 else { throw .badCount(countText) }
        let names = (environment["LISTEN_FDNAMES"] ?? "").split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        func name(_ i: Int) -> String? { i < names.count && !names[i].isEmpty ? names[i] : nil }
        var index = 0
        if count > 1 {
            guard let i = names.firstIndex(of: "control"), i < Int(count) else {
                throw .tooMany(Int(count), names: (0..<Int(count)).map { name($0) ?? "fd \(firstFD + Int32($0))" })
            }
            index = i
        }
        let fd = firstFD + Int32(index)
        try check(fd)
        // The passed descriptors arrive without FD_CLOEXEC; no child of reeld should hold them.
        for i in 0..<count { _ = fcntl(firstFD + i, F_SETFD, FD_CLOEXEC) }
        return Passed(fd: fd, name: name(index))
    }

    static func check(_ fd: Int32) throws(Failure) {
        func option(_ opt: Int32, _ what: String) throws(Failure) -> Int32 {
            var value: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            // Unsafe: getsockopt writes one Int32 into the local variable; len says so.
            guard Sys.eintrSafe({ getsockopt(fd, SOL_SOCKET, opt, &value, &len) }) == 0 else {
                throw .notAListeningUnixSocket(fd: fd, why: "getsockopt(\(what)): \(Errno.current)")
            }
            return value
        }
        guard try option(SO_DOMAIN, "SO_DOMAIN") == AF_UNIX else { throw .notAListeningUnixSocket(fd: fd, why: "not AF_UNIX") }
        guard try option(SO_TYPE, "SO_TYPE") == Int32(SOCK_STREAM.rawValue) else { throw .notAListeningUnixSocket(fd: fd, why: "not SOCK_STREAM") }
        guard try option(SO_ACCEPTCONN, "SO_ACCEPTCONN") != 0 else { throw .notAListeningUnixSocket(fd: fd, why: "not listening") }
    }
}
