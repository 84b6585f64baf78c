import Glibc
import ReelControl
import ReelSystem

/// Who may use the control socket: root, reeld's own user, `control_user` if set, and members
/// of `control_group` (primary or supplementary group, from SO_PEERCRED/SO_PEERGROUPS).
public struct PeerPolicy: Sendable {
    public let ownUID: UInt32
    public let user: (name: String, uid: UInt32)?
    public let group: (name: String, gid: UInt32)?
    /// Why the configured user or group could not be used (it does not exist), for the log.
    public let warnings: [String]

    public init(groupName: String?, userName: String?, ownUID: UInt32 = geteuid()) {
        self.ownUID = ownUID
        var warnings: [String] = []
        if let g = groupName {
            if let gid = Self.gid(of: g) { group = (g, gid) } else {
                group = nil
                warnings.append("control_group '\(g)' does not exist: only root and uid \(ownUID) may use the control socket (create the group, e.g. with systemd-sysusers, or set control_group)")
            }
        } else { group = nil }
        if let u = userName {
            if let uid = Self.uid(of: u) { user = (u, uid) } else {
                user = nil
                warnings.append("control_user '\(u)' does not exist and is ignored (check control_user)")
            }
        } else { user = nil }
        self.warnings = warnings
    }

    /// nil when `peer` may use the socket, else the refusal sent back as `forbidden`.
    public func check(_ peer: PeerCredentials) -> String? {
        if peer.uid == 0 || peer.uid == ownUID { return nil }
        if let user, peer.uid == user.uid { return nil }
        if let group, peer.gid == group.gid || peer.groups.contains(group.gid) { return nil }
        let who = Self.name(ofUID: peer.uid).map { "user \($0) (uid \(peer.uid))" } ?? "uid \(peer.uid)"
        if let group {
            return "\(who) may not control reeld: not in group \(group.name) (add it with 'usermod -aG \(group.name) USER' and log in again, or run as root)"
        }
        return "\(who) may not control reeld: only root and uid \(ownUID) may (set control_group in reeld.toml)"
    }

    public var authorizer: PeerAuthorizer { { [self] in check($0) } }

    public var summary: String {
        var parts = ["root", "uid \(ownUID)"]
        if let user { parts.append("user \(user.name)") }
        if let group { parts.append("group \(group.name)") }
        return parts.joined(separator: ", ")
    }

    static func gid(of name: String) -> UInt32? {
        var grp = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>?
        var buf = [CChar](repeating: 0, count: 16384)
        // Unsafe: getgrnam_r fills the local struct with pointers into `buf`; only gr_gid is read.
        let rc = getgrnam_r(name, &grp, &buf, buf.count, &result)
        return rc == 0 && result != nil ? grp.gr_gid : nil
    }

    static func uid(of name: String) -> UInt32? {
        var pw = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buf = [CChar](repeating: 0, count: 16384)
        // Unsafe: getpwnam_r fills the local struct with pointers into `buf`; only pw_uid is read.
        let rc = getpwnam_r(name, &pw, &buf, buf.count, &result)
        return rc == 0 && result != nil ? pw.pw_uid : nil
    }

    static func name(ofUID uid: UInt32) -> String? {
        var pw = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buf = [CChar](repeating: 0, count: 16384)
        // Unsafe: getpwuid_r fills the local struct with pointers into `buf`, read before it goes.
        guard getpwuid_r(uid, &pw, &buf, buf.count, &result) == 0, result != nil, let n = pw.pw_name else { return nil }
        return String(cString: n)
    }
}
