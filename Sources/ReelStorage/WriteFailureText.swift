import Glibc
import ReelSystem

/// The words for a recording cut short because its file could not be written: what the system
/// said, what it means, what was kept, and the fix. For example: `no space left on device writing
/// /v/x.mp4.part: the disk is full; kept the first 12.5 s as /v/x.mp4 (free space in /v, or lower
/// the bitrate)`.
package enum WriteFailureText {
    package enum Kept: Equatable {
        /// The complete fragments, `micros` of media, renamed to `file`.
        case prefix(micros: Int64, file: String)
        /// No fragment was complete: the file was removed.
        case nothing
        /// The file could not be cut back or renamed: why, and what happens to it.
        case unknown(String)
    }

    package static func message(errno code: Int32, verb: String, part: String, kept: Kept, dir: String) -> String {
        let (said, meaning, fix): (String, String, String)
        switch code {
        case ENOSPC: (said, meaning, fix) = ("no space left on device", "the disk is full", "free space in \(dir), or lower the bitrate")
        case EDQUOT:
            (said, meaning, fix) = ("disk quota exceeded", "the disk quota of user \(userName()) is used up",
                                    "free space in \(dir) within the quota, or raise the quota")
        case EIO:
            (said, meaning, fix) = ("input/output error", "the storage device failed",
                                    "check the disk and the kernel log (dmesg); record to another disk with --output-dir")
        case EFBIG:
            (said, meaning, fix) = ("file too large", "the file reached the largest size the file system or the process limit allows",
                                    "record shorter pieces, or use another file system")
        case EROFS:
            (said, meaning, fix) = ("read-only file system", "the file system was made read-only (often after disk errors)",
                                    "check the kernel log (dmesg) and remount it read-write")
        default:
            (said, meaning, fix) = (String(cString: strerror(code)).lowercased(), "the file could not be written", "check \(dir) and the kernel log (dmesg)")
        }
        let keptText: String
        switch kept {
        case let .prefix(micros, file): keptText = "kept the first \(seconds(micros)) as \(file)"
        case .nothing: keptText = "nothing could be kept (no fragment was complete), so \(part) was removed"
        case let .unknown(why): keptText = why
        }
        return "\(said) \(verb) \(part): \(meaning); \(keptText) (\(fix))"
    }

    /// "12.5 s" (rounded to a tenth).
    package static func seconds(_ micros: Int64) -> String {
        let tenths = (max(0, micros) + 50_000) / 100_000
        return "\(tenths / 10).\(tenths % 10) s"
    }

    private static func userName() -> String {
        guard let pw = getpwuid(geteuid()) else { return "uid \(geteuid())" }
        return String(cString: pw.pointee.pw_name)
    }
}
