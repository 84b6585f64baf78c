import Foundation
import Glibc
import Logging
import ReelCore
import ReelSystem

/// The outbox (`outbox_dir`): a flat directory on the output directory's file system where every
/// finished recording NAME.mp4 gets a hard link OUTBOX/NAME.mp4 (`Handoff.handOn`, before
/// on_finish). An uploader (`rclone move`, systemd/reel-upload.service) removes each link once the
/// file is stored elsewhere, so a recording is waiting for upload exactly while its link is here;
/// `keep_free_mb` (`RoomKeeper`) deletes only recordings whose link is gone.
public struct Outbox: Sendable, Equatable {
    public let path: String

    public init(path: String) { self.path = path }

    /// How a link went.
    public enum LinkResult: Equatable, Sendable {
        /// Made now, and the outbox synced.
        case linked(String)
        /// OUTBOX/NAME was already this file (a crash came after the link, before the hand-off
        /// marker said so): nothing to do but sync.
        case alreadyLinked(String)
        /// Not made: why, and the fix. The recording stays in the output directory.
        case failed(String)
    }

    /// At start (and at each SIGHUP): the outbox exists (created if missing, mode 0770; the package's
    /// tmpfiles.d makes it 2770 reel:reel), is a directory and not a link, is writable, and is on
    /// the same file system as `outputDir` (created if missing too). nil, or what is wrong and the fix.
    public static func problem(outbox: String, outputDir: String) -> String? {
        guard outbox.hasPrefix("/") else { return "outbox_dir \(outbox) is not an absolute path (give one, e.g. /var/lib/reel/outbox)" }
        if !FileManager.default.fileExists(atPath: outputDir) {
            do { try FileManager.default.createDirectory(atPath: outputDir, withIntermediateDirectories: true) }
            catch { return "cannot create output_dir \(outputDir) to check outbox_dir \(outbox) against it: \(error.localizedDescription) (check output_dir and its permissions)" }
        }
        var st = stat()
        // Unsafe: lstat fills the local stat; the path's C string lives for the call only.
        if lstat(outbox, &st) != 0 {
            guard errno == ENOENT else { return "cannot read outbox_dir \(outbox): \(Errno.current) (check its parent's permissions)" }
            if mkdir(outbox, 0o770) != 0, errno != EEXIST {
                return "cannot create outbox_dir \(outbox): \(Errno.current) (create it on the file system of output_dir \(outputDir), writable by reeld's user, e.g. 'install -d -m 2770 -o reel -g reel \(outbox)')"
            }
            // Group-writable whatever the umask: the uploader (group reel) removes links.
            _ = chmod(outbox, 0o770)
            guard lstat(outbox, &st) == 0 else { return "cannot read outbox_dir \(outbox) after creating it: \(Errno.current)" }
        }
        switch st.st_mode & S_IFMT {
        case S_IFDIR: break
        case S_IFLNK: return "outbox_dir \(outbox) is a symbolic link; reeld links recordings only into a real directory (give the directory it points to, on the file system of output_dir \(outputDir))"
        default: return "outbox_dir \(outbox) is not a directory (remove it, or give a directory on the file system of output_dir \(outputDir))"
        }
        guard access(outbox, W_OK | X_OK) == 0 else {
            return "outbox_dir \(outbox) is not writable by reeld's user (\(Errno.current)): give it to that user or its group, e.g. 'chown reel:reel \(outbox); chmod 2770 \(outbox)' (on the file system of output_dir \(outputDir))"
        }
        var out = stat()
        guard stat(outputDir, &out) == 0 else { return "cannot read output_dir \(outputDir) to check outbox_dir \(outbox) against it: \(Errno.current)" }
        if let why = filesystemMismatch(outboxDevice: UInt64(st.st_dev), outputDevice: UInt64(out.st_dev), outbox: outbox, outputDir: outputDir) {
            return why
        }
        return nil
    }

    /// The same-file-system rule on its own: a hard link cannot cross file systems (EXDEV), and a
    /// copy would cost the disk twice and break "waiting exactly while linked".
    public static func filesystemMismatch(outboxDevice: UInt64, outputDevice: UInt64, outbox: String, outputDir: String) -> String? {
        guard outboxDevice != outputDevice else { return nil }
        return "outbox_dir \(outbox) is on another file system than output_dir \(outputDir) (device \(outboxDevice) against \(outputDevice)); recordings are hard-linked into the outbox, which works only within one file system: put the outbox beside the recordings, e.g. \(outputDir)/outbox"
    }

    /// OUTBOX/NAME for the finished file `file` (OUTPUT/NAME): a hard link made with linkat
    /// relative to both directories (each opened O_DIRECTORY|O_NOFOLLOW, no AT_SYMLINK_FOLLOW), so
    /// a link planted at OUTBOX/NAME is never followed and nothing there is ever replaced (EEXIST:
    /// refused, unless it already is this very file). Then the outbox is synced, so the link
    /// survives a power cut.
    public func link(_ file: String) -> LinkResult {
        let (dir, name) = Self.split(file)
        let target = "\(path)/\(name)"
        // The output directory as configured (it may be reached through a link, as output_dir may);
        // the outbox never is (`problem` refuses a link there, and O_NOFOLLOW here).
        let src = Sys.eintrSafe { open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard src >= 0 else { return .failed("cannot open \(dir): \(Errno.current) (the recording stays there)") }
        defer { Sys.close(src) }
        let dst = Sys.eintrSafe { open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard dst >= 0 else {
            let why = errno == ELOOP || errno == ENOTDIR ? "it is not a directory (a symbolic link?)" : Errno.current
            return .failed("cannot open outbox_dir \(path): \(why) (restore it as a directory on the file system of \(dir), writable by reeld)")
        }
        defer { Sys.close(dst) }
        if linkat(src, name, dst, name, 0) != 0 {
            let code = errno
            guard code == EEXIST else {
                let fix = code == EXDEV ? "the outbox must be on the file system of \(dir)" : "check outbox_dir's permissions and free space"
                return .failed("cannot link \(file) into the outbox as \(target): \(Errno.text(code)) (\(fix))")
            }
            guard Self.sameFile(src, name, dst, name) else {
                return .failed("cannot link \(file) into the outbox: \(target): \(Sys.occupant(target)), and is not this recording; Reel never replaces or follows it (move it away, then link the recording by hand: 'ln \(file) \(target)')")
            }
            sync(dst)
            return .alreadyLinked(target)
        }
        sync(dst)
        return .linked(target)
    }

    private func sync(_ fd: Int32) {
        // A failed sync leaves the link in place (it is there, maybe not yet on the disk); the
        // hand-off marker then does not say "linked", so a crash before it is synced links again.
        _ = Sys.eintrSafe { fsync(fd) }
    }

    /// Whether OUTBOX/`name` is an entry (any kind, never followed): the recording is waiting.
    public func holds(_ name: String) -> Bool {
        var st = stat()
        // Unsafe: lstat fills the local stat; the path's C string lives for the call only.
        return lstat("\(path)/\(name)", &st) == 0
    }

    /// Both names are the same inode (neither followed).
    static func sameFile(_ dirA: Int32, _ a: String, _ dirB: Int32, _ b: String) -> Bool {
        var sa = stat(), sb = stat()
        guard fstatat(dirA, a, &sa, AT_SYMLINK_NOFOLLOW) == 0, fstatat(dirB, b, &sb, AT_SYMLINK_NOFOLLOW) == 0 else { return false }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino && sa.st_mode & S_IFMT == S_IFREG
    }

    static func split(_ path: String) -> (dir: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let dir = String(path[..<slash])
        return (dir.isEmpty ? "/" : dir, String(path[path.index(after: slash)...]))
    }

    /// The most entries one census reads: a metrics tick stays bounded however full the outbox.
    public static let censusLimit = 10_000

    /// What the outbox holds, for the metrics: its regular `.mp4` files (never followed), their
    /// bytes and the oldest's modification time (wall clock, ns), from at most `limit` entries.
    /// nil when the directory cannot be read.
    public func census(limit: Int = Outbox.censusLimit) -> OutboxCensus? {
        let fd = Sys.eintrSafe { open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        defer { Sys.close(fd) }
        guard let (names, complete) = Sys.directoryNames(fd, limit: limit) else { return nil }
        var c = OutboxCensus()
        for name in names where name.hasSuffix(".mp4") && !name.hasPrefix(".") {
            var st = stat()
            guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            c.add(bytes: Int64(st.st_size), modifiedNs: Sys.nanos(st.st_mtim))
        }
        c.complete = complete
        return c
    }
}

/// The outbox's recordings as the metrics show them.
public struct OutboxCensus: Equatable, Sendable {
    public var files = 0
    public var bytes: Int64 = 0
    /// The oldest file's modification time, wall clock ns (CLOCK_REALTIME); nil when empty.
    public var oldestModifiedNs: Nanos?
    /// False when the census stopped at its limit of entries (more files wait than counted).
    public var complete = true

    public init() {}

    mutating func add(bytes b: Int64, modifiedNs: Nanos) {
        files += 1
        bytes += b
        oldestModifiedNs = min(oldestModifiedNs ?? modifiedNs, modifiedNs)
    }

    /// Whole seconds since the oldest file was finished, at wall-clock instant `nowNs`; 0 when
    /// nothing waits (a clock set back counts as 0, never negative).
    public func oldestAgeSeconds(nowNs: Nanos) -> Int64 {
        guard let t = oldestModifiedNs else { return 0 }
        return max(0, nowNs - t) / nanosPerSecond
    }

    /// CLOCK_REALTIME in ns: file times are on the wall clock, not the monotonic one.
    public static func wallClockNs() -> Nanos {
        var ts = timespec()
        // Unsafe: clock_gettime fills the local timespec.
        clock_gettime(CLOCK_REALTIME, &ts)
        return Sys.nanos(ts)
    }
}
