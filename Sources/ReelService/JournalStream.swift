import Glibc
import ReelSystem

/// Whether stderr is the journal: systemd sets `JOURNAL_STREAM=DEV:INODE` for the stream it
/// connected; it counts only if fd 2 is still that stream (not redirected by a wrapper), as
/// systemd.exec(5) recommends. Then log lines carry `<N>` priority prefixes.
public enum JournalStream {
    public static func isStderr(environment: [String: String], fd: Int32 = 2) -> Bool {
        guard let v = environment["JOURNAL_STREAM"] else { return false }
        let parts = v.split(separator: ":")
        guard parts.count == 2, let dev = UInt64(parts[0]), let ino = UInt64(parts[1]) else { return false }
        var st = stat()
        guard Sys.eintrSafe({ fstat(fd, &st) }) == 0 else { return false }
        return UInt64(st.st_dev) == dev && UInt64(st.st_ino) == ino
    }
}
