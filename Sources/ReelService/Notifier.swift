import Glibc
import ReelSystem

/// The systemd notify protocol (sd_notify): one datagram to $NOTIFY_SOCKET. A no-op when the
/// variable is unset, so reeld runs the same under systemd, in tests and in a terminal.
/// Never blocks: when the receiver's queue is full the message is dropped (send returns false).
public struct Notifier: Sendable {
    private let path: String?
    public init(environment: [String: String]) { path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 } }
    public var isEnabled: Bool { path != nil }

    @discardableResult
    public func send(_ message: String) -> Bool {
        guard let path else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace
        let cap = MemoryLayout.size(ofValue: addr.sun_path)
        guard bytes.count < cap else { return false }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let len = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1))
        let msg = Array(message.utf8)
        // MSG_DONTWAIT: a receiver that does not read (its queue holds ~10 datagrams) must never
        // block a control request or the supervisor; the message is dropped instead.
        // Unsafe: views the local sockaddr_un as a sockaddr for the duration of the call only.
        let sent = Sys.eintrSafe {
            withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    msg.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT), sa, len) }
                }
            }
        }
        return sent == msg.count
    }
}
