import Foundation
import Glibc
import ReelCore
import ReelSystem

/// One finished recording as `GET /api/recordings` lists it.
public struct RecordingEntry: Codable, Sendable, Equatable {
    public var name: String
    public var bytes: Int64
    public var modifiedNs: Nanos
    public init(name: String, bytes: Int64, modifiedNs: Nanos) {
        self.name = name
        self.bytes = bytes
        self.modifiedNs = modifiedNs
    }
}

/// An open recording, read-only, closed when the last reference goes.
/// @unchecked Sendable: `fd` never changes and pread(2) needs no lock.
public final class OpenRecording: @unchecked Sendable {
    public let fd: Int32
    public let size: Int64
    public let modifiedNs: Nanos
    init(fd: Int32, size: Int64, modifiedNs: Nanos) {
        self.fd = fd
        self.size = size
        self.modifiedNs = modifiedNs
    }
    deinit { Sys.close(fd) }

    /// Up to `count` bytes at `offset` (fewer at the end of the file); throws on a read error.
    public func read(at offset: Int64, count: Int) throws(SystemError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let got = try Sys.retrying("pread") {
            buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
        }
        buffer.removeLast(count - got)
        return buffer
    }
}

/// The recordings directory as reel-web shows it: finished `.mp4` files only, never a `.part`,
/// a `.damaged`, a link, a directory or anything outside. Every file is opened read-only,
/// relative to the directory, with O_NOFOLLOW; reel-web never opens anything there for writing.
/// A file with two names is served only when the other is its entry in reeld's outbox
/// (`outbox`, `--outbox-dir`: a recording waiting for upload), never another hard link.
public struct RecordingsDirectory: Sendable {
    public let path: String
    /// reeld's `outbox_dir`, or nil.
    public let outbox: String?

    public init(path: String, outbox: String? = nil) { self.path = path; self.outbox = outbox }

    /// Whether `name` (already percent-decoded) may name a recording: a plain file name ending in
    /// `.mp4` (so never a `.mp4.part` or `.part.damaged`), no slash, no NUL, not hidden.
    public static func isRecordingName(_ name: String) -> Bool {
        isPlainName(name) && name.hasSuffix(".mp4") && name.utf8.count > 4
    }

    /// A single path component that cannot leave its directory: not empty, at most 255 bytes, no
    /// `/` or NUL or control character, not starting with a dot (`.`, `..`, hidden files).
    public static func isPlainName(_ name: String) -> Bool {
        let u = name.utf8
        return !u.isEmpty && u.count <= 255 && u.first != UInt8(ascii: ".")
            && !u.contains(where: { $0 == UInt8(ascii: "/") || $0 < 0x20 || $0 == 0x7f })
    }

    /// The finished recordings, newest first (then by name).
    public func list() throws(SystemError) -> [RecordingEntry] {
        let dirFd = try openDirectory()
        // Unsafe pointer: readdir's DIR, owned here and closed by closedir (which closes dirFd).
        guard let dir = fdopendir(dirFd) else {
            let code = errno
            Sys.close(dirFd)
            throw SystemError(call: "fdopendir(\(path))", errno: code)
        }
        defer { closedir(dir) }
        var entries: [RecordingEntry] = []
        while let ent = readdir(dir) {
            let name = withUnsafeBytes(of: ent.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard Self.isRecordingName(name) else { continue }
            var st = stat()
            guard fstatat(dirFd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, isServable(st, name: name) else { continue }
            entries.append(RecordingEntry(name: name, bytes: Int64(st.st_size), modifiedNs: Self.mtimeNs(st)))
        }
        return entries.sorted { ($0.modifiedNs, $1.name) > ($1.modifiedNs, $0.name) }
    }

    /// Opens recording `name` read-only; nil (a 404) when the name is not a recording's, or the
    /// file is missing, a link, not a regular file or has other names (hard links).
    public func open(_ name: String) throws(SystemError) -> OpenRecording? {
        guard Self.isRecordingName(name) else { return nil }
        let dirFd = try openDirectory()
        defer { Sys.close(dirFd) }
        let fd = Sys.eintrSafe { openat(dirFd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) }
        guard fd >= 0 else {
            let code = errno
            if [ENOENT, ELOOP, ENOTDIR, EISDIR, ENXIO].contains(code) { return nil }
            throw SystemError(call: "openat(\(path)/\(name))", errno: code)
        }
        var st = stat()
        guard fstat(fd, &st) == 0, isServable(st, name: name) else {
            Sys.close(fd)
            return nil
        }
        return OpenRecording(fd: fd, size: Int64(st.st_size), modifiedNs: Self.mtimeNs(st))
    }

    private func openDirectory() throws(SystemError) -> Int32 {
        let fd = Sys.eintrSafe { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { throw SystemError(call: "open(\(path))", errno: errno) }
        return fd
    }

    /// A regular file with one name, or with two when the other is OUTBOX/`name` itself (the same
    /// device and inode, looked at without following a link): a recording waiting for upload. A
    /// link planted beside the recordings is never followed, and a file hard-linked from
    /// anywhere else (another user's file given a name here) is never served.
    func isServable(_ st: stat, name: String) -> Bool {
        guard (st.st_mode & S_IFMT) == S_IFREG else { return false }
        if st.st_nlink == 1 { return true }
        guard st.st_nlink == 2, let outbox else { return false }
        let fd = Sys.eintrSafe { Glibc.open(outbox, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { return false }
        defer { Sys.close(fd) }
        var other = stat()
        return fstatat(fd, name, &other, AT_SYMLINK_NOFOLLOW) == 0 && (other.st_mode & S_IFMT) == S_IFREG
            && other.st_dev == st.st_dev && other.st_ino == st.st_ino
    }

    static func mtimeNs(_ st: stat) -> Nanos {
        Nanos(st.st_mtim.tv_sec) * nanosPerSecond + Nanos(st.st_mtim.tv_nsec)
    }
}

/// A `Range` request header for one file (RFC 9110 §14): only a single byte range is honoured.
public enum ByteRange: Equatable, Sendable {
    /// No usable range: send the whole file with 200.
    case whole
    /// Bytes `first ... last` (inclusive), with 206.
    case part(first: Int64, last: Int64)
    /// A range past the end: 416.
    case unsatisfiable

    /// `header` against a file of `size` bytes. Several ranges, or a malformed header, count as
    /// none (the whole file), as the RFC allows.
    public static func parse(_ header: String?, size: Int64) -> ByteRange {
        guard let header else { return .whole }
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { return .whole }
        let spec = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard let dash = spec.firstIndex(of: "-") else { return .whole }
        let a = spec[..<dash], b = spec[spec.index(after: dash)...]
        func number(_ s: Substring) -> Int64? {
            guard !s.isEmpty, s.count <= 18, s.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            return Int64(s)
        }
        if a.isEmpty {
            guard let suffix = number(b) else { return .whole }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .part(first: max(0, size - suffix), last: size - 1)
        }
        guard let first = number(a) else { return .whole }
        let last: Int64
        if b.isEmpty {
            last = size - 1
        } else {
            guard let l = number(b), l >= first else { return .whole }
            last = min(l, size - 1)
        }
        guard first < size else { return .unsatisfiable }
        return .part(first: first, last: last)
    }
}
