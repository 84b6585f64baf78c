import Glibc
import ReelCore

extension Sys {
    /// The names in the open directory `fd` (read through a duplicate: `fd` stays open and the
    /// caller's), at most `limit` entries read ("." and ".." count); `complete` is false when
    /// entries were left unread. nil when the directory cannot be read.
    package static func directoryNames(_ fd: Int32, limit: Int = .max) -> (names: [String], complete: Bool)? {
        let dup = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard dup >= 0 else { return nil }
        // Unsafe pointer: readdir's DIR, owned here and closed by closedir (which closes dup).
        guard let dir = fdopendir(dup) else { close(dup); return nil }
        defer { closedir(dir) }
        rewinddir(dir)  // the duplicate shares its offset with fd: from the start
        var names: [String] = []
        var read = 0
        while read < limit, let ent = readdir(dir) {
            read += 1
            names.append(withUnsafeBytes(of: ent.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
        }
        return (names, readdir(dir) == nil)
    }

    /// A `timespec` (a file's time, a clock's reading) as integer ns.
    package static func nanos(_ ts: timespec) -> Nanos { Nanos(ts.tv_sec) * nanosPerSecond + Nanos(ts.tv_nsec) }
}
