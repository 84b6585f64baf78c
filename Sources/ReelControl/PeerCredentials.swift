import Glibc
import ReelSystem

/// Who is on the other end of a control connection, as the kernel saw it at connect time
/// (SO_PEERCRED, SO_PEERGROUPS): not something the client can claim.
public struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// Supplementary groups; empty when the kernel cannot tell (before Linux 4.13).
    public var groups: [UInt32]

    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32]) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    public var description: String { "pid \(pid) uid \(uid) gid \(gid)" }
}

/// Decides whether a peer may use the control socket: nil to allow, or the refusal message
/// (which names what is missing and the fix) sent back as a `forbidden` error.
public typealias PeerAuthorizer = @Sendable (PeerCredentials) -> String?

/// The kernel's `struct ucred` (pid_t, uid_t, gid_t), which Swift's Glibc module does not export.
private struct UCred {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

extension Sys {
    static func peerCredentials(_ fd: Int32) throws(SystemError) -> PeerCredentials {
        var cred = UCred()
        var len = socklen_t(MemoryLayout<UCred>.size)
        // Unsafe: getsockopt writes at most len bytes (the size of UCred) into the local struct.
        _ = try retrying("getsockopt(SO_PEERCRED)") { getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) }
        var groups = [UInt32](repeating: 0, count: 64)
        var glen = socklen_t(groups.count * MemoryLayout<UInt32>.size)
        var failure: SystemError?
        do {
            _ = try retrying("getsockopt(SO_PEERGROUPS)") {
                // Unsafe: getsockopt writes at most glen bytes into the array's own storage.
                groups.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, $0.baseAddress, &glen) }
            }
        } catch {
            failure = error
            if error.errno != ERANGE { glen = 0 }  // unsupported kernel: primary group only
        }
        if failure?.errno == ERANGE {
            // More than 64 groups: glen now holds the size needed.
            groups = [UInt32](repeating: 0, count: Int(glen) / MemoryLayout<UInt32>.size)
            do {
                _ = try retrying("getsockopt(SO_PEERGROUPS)") {
                    // Unsafe: as above, with the array resized to the size the kernel asked for.
                    groups.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, $0.baseAddress, &glen) }
                }
            } catch {
                glen = 0
            }
        }
        let count = min(groups.count, Int(glen) / MemoryLayout<UInt32>.size)
        return PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid, groups: Array(groups.prefix(count)))
    }
}
