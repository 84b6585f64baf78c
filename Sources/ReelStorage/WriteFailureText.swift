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
        let said = Errno.text(code)
        let (meaning, fix) = Errno.storage(code, dir: dir)
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
}
