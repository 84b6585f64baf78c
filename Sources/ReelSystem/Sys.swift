import CGlibcShim
import Glibc

/// A failed system call: which one and its errno, read immediately after the call.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public let call: String
    public let errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// Short lower-case text for the errno, e.g. "no such file".
    public var reason: String { Sys.describe(errno) }
    public var description: String { "\(call): \(reason)" }
}

/// Thin wrappers over the socket calls. Each reads errno right after the call, retries EINTR
/// (here, in `retrying`, and nowhere else) and throws `SystemError`.
package enum Sys {
    /// Runs `call` until it does not fail with EINTR. A negative result is a failure.
    @inline(__always)
    package static func retrying<T: BinaryInteger>(_ name: String, _ call: () -> T) throws(SystemError) -> T {
        while true {
            let result = call()
            if result >= 0 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            throw SystemError(call: name, errno: code)
        }
    }

    package static func describe(_ code: Int32) -> String { Errno.text(code) }

    /// glibc's mmap threshold fixed at `bytes` (its dynamic adjustment off): blocks at least that
    /// large are mapped on their own and unmapped on free. False if glibc refused.
    @discardableResult
    package static func fixMmapThreshold(bytes: Int32) -> Bool { creel_fix_mmap_threshold(bytes) == 1 }

    /// The one EINTR retry for calls that return -1 and set errno (or, with `returnsErrno`, return
    /// the errno itself, as clock_nanosleep and posix_spawn do): runs `call` again while it fails
    /// with EINTR and returns its last result. For callers that read errno themselves.
    @inline(__always)
    @discardableResult
    package static func eintrSafe<T: BinaryInteger>(returnsErrno: Bool = false, _ call: () -> T) -> T {
        while true {
            let r = call()
            if returnsErrno ? r == T(EINTR) : (r < 0 && Glibc.errno == EINTR) { continue }
            return r
        }
    }

    // MARK: calls

    package static func socketUnix(nonblocking: Bool) throws(SystemError) -> Int32 {
        let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | (nonblocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        return try retrying("socket") { Glibc.socket(AF_UNIX, flags, 0) }
    }

    /// A `sockaddr_un` for `path`, or nil when the path does not fit (107 bytes and a NUL).
    package static func address(_ path: String) -> sockaddr_un? {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity, !bytes.contains(0) else { return nil }
        // Unsafe: writes bytes.count (< capacity, checked above) bytes into the fixed-size sun_path tuple.
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        return addr
    }

    package static let maxPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    package static func bind(_ fd: Int32, _ addr: sockaddr_un) throws(SystemError) {
        var addr = addr
        _ = try retrying("bind") {
            // Unsafe: views the local sockaddr_un as a sockaddr for the duration of the call only.
            withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        }
    }

    package static func connect(_ fd: Int32, _ addr: sockaddr_un) throws(SystemError) {
        var addr = addr
        _ = try retrying("connect") {
            // Unsafe: views the local sockaddr_un as a sockaddr for the duration of the call only.
            withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        }
    }

    package static func listen(_ fd: Int32, backlog: Int32) throws(SystemError) {
        _ = try retrying("listen") { Glibc.listen(fd, backlog) }
    }

    /// Accepts one connection as a non-blocking socket that is close-on-exec from its first
    /// instant (accept4), so an on_finish program spawned meanwhile cannot inherit it.
    package static func accept(_ fd: Int32) throws(SystemError) -> Int32 {
        try retrying("accept4") { creel_accept_cloexec(fd, 1) }
    }

    /// Receives into `buffer` (never blocks); 0 means end of stream.
    package static func recv(_ fd: Int32, into buffer: inout [UInt8]) throws(SystemError) -> Int {
        let result = buffer.withUnsafeMutableBytes { raw in
            // Unsafe: recv writes at most raw.count bytes into the array's own storage.
            Result { () throws(SystemError) in
                try retrying("recv") { Glibc.recv(fd, raw.baseAddress, raw.count, Int32(MSG_DONTWAIT)) }
            }
        }
        return try result.get()
    }

    /// Sends `bytes[offset...]` without blocking and without ever raising SIGPIPE
    /// (MSG_NOSIGNAL); a vanished peer is EPIPE. Returns the number of bytes sent.
    package static func send(_ fd: Int32, _ bytes: [UInt8], from offset: Int = 0) throws(SystemError) -> Int {
        let result = bytes.withUnsafeBytes { raw in
            // Unsafe: the array's storage is valid during the call; offset <= count is checked by rebasing.
            Result { () throws(SystemError) in
                let tail = UnsafeRawBufferPointer(rebasing: raw[offset...])
                return try retrying("send") {
                    Glibc.send(fd, tail.baseAddress, tail.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                }
            }
        }
        return try result.get()
    }

    /// Writes all of `bytes` to a file: at `offset` (pwrite) or, without one, at the file position
    /// (write); a short write goes on from where it stopped, EINTR is retried. Returns the bytes
    /// written and, when it stopped before the end, the errno (a write that writes nothing: EIO).
    package static func writeFully(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64? = nil) -> (written: Int, errno: Int32?) {
        var done = 0
        while done < bytes.count {
            // Unsafe: done < bytes.count, so the pointer and length stay inside `bytes`.
            let p = bytes.baseAddress! + done, left = bytes.count - done
            let n = eintrSafe { offset.map { pwrite(fd, p, left, off_t($0 + Int64(done))) } ?? Glibc.write(fd, p, left) }
            if n < 0 { return (done, Glibc.errno) }
            if n == 0 { return (done, EIO) }
            done += n
        }
        return (done, nil)
    }

    // MARK: creating files: never through a planted link, never over a file already there

    /// Creates `path` for writing, close-on-exec: never follows a symbolic link at its last
    /// component and never opens a file already there (O_CREAT|O_EXCL|O_NOFOLLOW: a link, even a
    /// dangling one, is EEXIST). With `exactMode` the file gets `mode` whatever the umask.
    package static func createExclusive(_ path: String, mode: mode_t = 0o644, exactMode: Bool = false) throws(SystemError) -> Int32 {
        let fd = try retrying("open") { open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode) }
        if exactMode { fchmod(fd, mode) }
        return fd
    }

    /// Creates `path` (`createExclusive`: never through a link, never over a file), writes all of
    /// `bytes` and closes it. Returns nil, or the errno of the step that failed and whether the
    /// file was created at all (open failed: `created` false; EEXIST: something is there, see
    /// `occupant`); a failed close counts, since the bytes may not have been written.
    package static func writeFile(_ path: String, _ bytes: UnsafeRawBufferPointer, mode: mode_t = 0o644,
                                  exactMode: Bool = false) -> (created: Bool, errno: Int32)? {
        let fd: Int32
        do { fd = try createExclusive(path, mode: mode, exactMode: exactMode) } catch { return (false, error.errno) }
        let failed = writeFully(fd, bytes).errno
        let closed = Glibc.close(fd) == 0 ? nil : Glibc.errno
        return (failed ?? closed).map { (true, $0) }
    }

    /// What stands at `path`, for the message when creating it failed with EEXIST: "it exists and
    /// is a symbolic link", "... a directory" or "it exists". Never follows a link.
    package static func occupant(_ path: String) -> String {
        var st = stat()
        // Unsafe: lstat fills the local stat; the path's C string lives for the call only.
        guard lstat(path, &st) == 0 else { return "it exists" }  // gone again since: a race
        switch st.st_mode & S_IFMT {
        case S_IFLNK: return "it exists and is a symbolic link"
        case S_IFDIR: return "it exists and is a directory"
        default: return "it exists"
        }
    }

    /// The message for a file that could not be created: for EEXIST `refusing to write PATH: it
    /// exists and is a symbolic link (remove it; FIX)`, else `cannot create PATH: REASON (FIX)`.
    package static func createFailure(_ path: String, errno code: Int32, fix: String) -> String {
        code == EEXIST ? "refusing to write \(path): \(occupant(path)) (remove it; \(fix))"
                       : "cannot create \(path): \(describe(code)) (\(fix))"
    }

    /// Renames `from` to `to` only when nothing is at `to` (renameat2 RENAME_NOREPLACE): a file or
    /// link already there is EEXIST, never replaced. A file system without RENAME_NOREPLACE
    /// (EINVAL) gets link(2) then unlink(2), which refuses an existing `to` the same way.
    package static func renameNoReplace(_ from: String, _ to: String) throws(SystemError) {
        if creel_rename_noreplace(from, to) == 0 { return }
        let code = Glibc.errno
        guard code == EINVAL || code == ENOSYS else { throw SystemError(call: "renameat2", errno: code) }
        _ = try retrying("link") { Glibc.link(from, to) }
        _ = Glibc.unlink(from)
    }

    /// Polls; `timeoutMs` is asked again after each EINTR so a deadline is kept.
    package static func poll(_ fds: inout [pollfd], timeoutMs: () -> Int32) throws(SystemError) -> Int32 {
        try retrying("poll") {
            // Unsafe: the array's storage is valid for the duration of the call, count matches.
            fds.withUnsafeMutableBufferPointer { Glibc.poll($0.baseAddress, nfds_t($0.count), timeoutMs()) }
        }
    }

    package static func setNonblocking(_ fd: Int32) throws(SystemError) {
        let flags = try retrying("fcntl(F_GETFL)") { fcntl(fd, F_GETFL) }
        _ = try retrying("fcntl(F_SETFL)") { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }

    package static func setCloseOnExec(_ fd: Int32) throws(SystemError) {
        let flags = try retrying("fcntl(F_GETFD)") { fcntl(fd, F_GETFD) }
        _ = try retrying("fcntl(F_SETFD)") { fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
    }

    package static func setSendTimeout(_ fd: Int32, ms: Int) throws(SystemError) {
        var tv = timeval(tv_sec: ms / 1000, tv_usec: (ms % 1000) * 1000)
        _ = try retrying("setsockopt(SO_SNDTIMEO)") {
            // Unsafe: passes a pointer to the local timeval and its exact size for the call only.
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    package static func chmod(_ path: String, _ mode: mode_t) throws(SystemError) {
        _ = try retrying("chmod") { Glibc.chmod(path, mode) }
    }

    /// Device and inode of `path` if it is a socket, nil if it is something else; throws if absent.
    package static func socketIdentity(_ path: String) throws(SystemError) -> FileIdentity? {
        var st = stat()
        // Unsafe: lstat fills the local stat; the path's C string lives for the call only.
        _ = try retrying("lstat") { lstat(path, &st) }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else { return nil }
        return FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    package static func unlink(_ path: String) throws(SystemError) {
        _ = try retrying("unlink") { Glibc.unlink(path) }
    }

    /// Closes `fd`. Not retried on EINTR: on Linux the descriptor is released regardless.
    package static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// A non-blocking pipe, close-on-exec from its first instant (pipe2), used to wake a thread
    /// blocked in poll: (read, write). (Glibc's Swift module exports neither eventfd nor pipe2.)
    package static func wakePipe() throws(SystemError) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        // Unsafe: pipe2 writes exactly two descriptors into the two-element array.
        _ = try retrying("pipe2") { ends.withUnsafeMutableBufferPointer { creel_pipe_cloexec_nonblock($0.baseAddress) } }
        return (ends[0], ends[1])
    }

    /// Writes one byte to a wake pipe. EAGAIN (pipe full, so a wakeup is pending anyway) is ignored.
    package static func wake(_ fd: Int32) {
        var byte: UInt8 = 1
        // Unsafe: writes the one byte of a local variable.
        _ = try? retrying("write(wake pipe)") { Glibc.write(fd, &byte, 1) }
    }

    /// Empties a wake pipe's read end.
    package static func drain(_ fd: Int32) {
        var sink = [UInt8](repeating: 0, count: 256)
        // Unsafe: read writes at most sink.count bytes into the array's own storage.
        while let n = try? retrying("read(wake pipe)", { sink.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) } }),
              n == sink.count {}
    }

    /// CLOCK_MONOTONIC in milliseconds.
    package static func monotonicNs() -> Int64 {
        var ts = timespec()
        // Unsafe: clock_gettime fills the local timespec. CLOCK_MONOTONIC cannot fail.
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    package static func monotonicMs() -> Int64 {
        var ts = timespec()
        // Unsafe: clock_gettime fills the local timespec. CLOCK_MONOTONIC cannot fail.
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}

/// Identifies a file across renames: used to remove only the socket file this process created.
package struct FileIdentity: Equatable, Sendable {
    package var device: UInt64
    package var inode: UInt64
}
