import Glibc
import ReelSystem

/// Why `MP4Finisher` did not finish a file, naming the file and, for damage, the box and its offset:
/// `cannot finish /x/a.mp4.part: trun at offset 1234 claims 4294967295 samples but holds 96 bytes
/// (the file is damaged; it is left as it was)`.
public struct MP4FinishError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Equatable, Sendable {
        /// A size, count, offset or field that cannot be right, a box cut short in the middle of the
        /// file, a box twice, a box Reel does not write: nothing was written.
        case damaged
        /// Well formed, but not what the finisher makes a standard MP4 of (no placeholder: another
        /// program's MP4 or an older Reel's; no complete fragment): nothing was written.
        case unsupported
        /// A system call failed with this errno (ENOSPC, EIO, ...).
        case system(Int32)
    }
    public let kind: Kind
    public let path: String
    /// The four-character type of the box at fault and its offset in the file (nil: not one box's fault).
    public let box: String?
    public let offset: Int64?
    /// What is wrong, without the file's name: "claims 4294967295 samples but holds 96 bytes".
    public let problem: String

    public init(_ kind: Kind, path: String, box: String? = nil, offset: Int64? = nil, problem: String) {
        self.kind = kind; self.path = path; self.box = box; self.offset = offset; self.problem = problem
    }

    /// The errno of a `.system` error (as `MediaError.systemError`).
    public var systemError: Int32? { if case let .system(e) = kind { e } else { nil } }

    public var description: String {
        let at = box.map { b in offset.map { "\(b) at offset \($0) " } ?? "\(b) " } ?? ""
        switch kind {
        case .damaged: return "cannot finish \(path): \(at)\(problem) (the file is damaged; it is left as it was)"
        case .unsupported: return "cannot finish \(path): \(at)\(problem) (it is left as it was)"
        case .system(let e): return "cannot finish \(path): \(problem): \(Errno.text(e)) (\(Self.advice(e)))"
        }
    }

    static func advice(_ e: Int32) -> String {
        switch e {
        case ENOSPC, EDQUOT: "free space on the disk; the file is cut back to its last complete fragment, which plays"
        case EIO: "the disk failed? the file stays fragmented and plays up to its last complete fragment"
        case ENOENT: "is the file still there?"
        case EACCES, EPERM, EROFS: "can reeld write the file? see its owner and mode"
        case ELOOP: "a symbolic link: the finisher does not follow links"
        default: "the file stays fragmented and plays up to its last complete fragment"
        }
    }
}

/// What is wrong with a box read into memory: its type, its offset in the file, what.
struct Damaged: Error {
    let box: String
    let offset: Int64
    let what: String
    /// Not damage: the file is too long to finish within the memory budget.
    var tooLong = false
    func error(_ path: String) -> MP4FinishError {
        MP4FinishError(tooLong ? .unsupported : .damaged, path: path, box: box, offset: offset, problem: what)
    }
}
