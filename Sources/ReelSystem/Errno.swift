import Glibc

/// Reel's one errno table: the words for every errno a message shows, and for the errnos a
/// recording's storage meets, what they mean there and the fix. `SystemError`, the device
/// errors, `WriteFailureText` and `MP4Writer`'s open failure all read it; nothing else turns an
/// errno into text (strerror's words, lower-cased, for the rest).
package enum Errno {
    /// Short lower-case words, e.g. "no such file" or "no space left on device".
    package static func text(_ code: Int32) -> String {
        switch code {
        case ENOENT: return "no such file"
        case ENODEV: return "no such device (unplugged or disconnected)"
        case EACCES: return "permission denied"
        case EPERM: return "operation not permitted"
        case EBUSY: return "device busy"
        case EIO: return "input/output error"
        case ECONNREFUSED: return "connection refused"
        case EADDRINUSE: return "address in use"
        case ENOTDIR: return "a path component is not a directory"
        case ENAMETOOLONG: return "path too long"
        case EPIPE: return "broken pipe"
        case ECONNRESET: return "connection reset"
        case EMFILE: return "too many open files in this process"
        case ENFILE: return "too many open files in the system"
        case EAGAIN: return "timed out / would block"
        case ENOTSOCK: return "not a socket"
        case EROFS: return "read-only file system"
        case ENOSPC: return "no space left on device"
        case EDQUOT: return "disk quota exceeded"
        case EFBIG: return "file too large"
        default: return String(cString: strerror(code)).lowercased()
        }
    }

    /// The words for the calling thread's errno now.
    package static var current: String { text(Glibc.errno) }

    /// What an errno means for a recording's file in directory `dir`, and the fix. Anything
    /// not listed: the file could not be written; check the directory and the kernel log.
    package static func storage(_ code: Int32, dir: String) -> (meaning: String, fix: String) {
        switch code {
        case ENOSPC: return ("the disk is full", "free space in \(dir), or lower the bitrate")
        case EDQUOT: return ("the disk quota of user \(userName()) is used up", "free space in \(dir) within the quota, or raise the quota")
        case EIO: return ("the storage device failed", "check the disk and the kernel log (dmesg); record to another disk with --output-dir")
        case EFBIG: return ("the file reached the largest size the file system or the process limit allows",
                            "record shorter pieces, or use another file system")
        case EROFS: return ("the file system is read-only, often after disk errors",
                            "check the kernel log (dmesg) and remount it read-write, or record to another disk")
        case ENOENT: return ("the directory \(dir) does not exist", "create it, or choose another --output-dir")
        case EACCES, EPERM: return ("the user running reeld may not write there", "let the user running reeld write to the directory \(dir)")
        default: return ("the file could not be written", "check \(dir) and the kernel log (dmesg)")
        }
    }

    /// The fix for an errno from opening a capture device (`kind`: "camera" or "microphone").
    package static func deviceOpenHint(_ code: Int32, kind: String) -> String {
        switch code {
        case ENOENT, ENODEV, ENXIO: return "is the \(kind) plugged in? see 'reelctl devices'"
        case EACCES, EPERM: return "add the user running reeld to the '\(kind == "camera" ? "video" : "audio")' group"
        case EBUSY: return "another program is using the \(kind); close it or choose another device"
        default: return "see 'reelctl devices'"
        }
    }

    private static func userName() -> String {
        guard let pw = getpwuid(geteuid()) else { return "uid \(geteuid())" }
        return String(cString: pw.pointee.pw_name)
    }
}

/// The directory part of a path ("." for a bare name), as messages name it.
package func directory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}

/// A fixed-size C char array (imported as a tuple) as a String, up to its first NUL.
package func cString<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { raw in
        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
}
