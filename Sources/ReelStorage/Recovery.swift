import CGlibcShim
import Foundation
import Glibc
import Logging
import ReelCore
import ReelMedia
import ReelSystem

/// What start-up recovery did with one `NAME.mp4.part`.
public struct PartRecovery: Equatable, Sendable {
    public enum Outcome: Equatable, Sendable {
        /// Finished (or found finished) and renamed: `file` is the recording, as if stopped normally.
        case recovered(file: String)
        /// Reel's, with nothing recorded in it: removed.
        case removed
        /// Left exactly as it was (why): a recording in progress in another process, a file that
        /// is not Reel's, or a failure outside the file (the disk full or failing; tried again at
        /// the next start).
        case leftAlone(String)
        /// Reel's, but it cannot be finished (why): moved aside byte for byte to `to`, reported
        /// once; recovery never takes it up again.
        case movedAside(to: String, why: String)
    }
    public let part: String
    public let outcome: Outcome
}

extension Storage {
    /// How long reeld waits for start-up recovery before it goes on to serve (READY=1): beyond
    /// it, recovery carries on in the background (a week-long file, a disk that stopped answering).
    public static let recoveryWaitBeforeReadyNs: Nanos = 5 * nanosPerSecond

    /// The suffix a `.part` that cannot be finished is moved aside with (`NAME.mp4.part.damaged`).
    public static let damagedSuffix = ".damaged"

    /// What the `.part` at `path` holds (`PartWalk`): opened without following a link, not
    /// blocking on a FIFO, regular files only.
    public static func partContents(_ path: String) throws -> PartContents {
        let fd = Sys.eintrSafe { open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard fd >= 0 else { throw RecorderFailure("cannot open \(path) for recovery: \(Errno.current)") }
        defer { Glibc.close(fd) }
        return try partContents(fd: fd, path: path)
    }

    static func partContents(fd: Int32, path: String) throws -> PartContents {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw RecorderFailure("cannot stat \(path) for recovery: \(Errno.current)") }
        guard st.st_mode & S_IFMT == S_IFREG else { return .notReels("it is not a regular file") }
        let reader = WindowedReader(fd: fd, size: Int64(st.st_size), path: path)
        return try PartWalk(size: Int64(st.st_size), read: reader.read).contents()
    }

    /// Makes every `*.mp4.part` in `dir` a finished recording `*.mp4` (or `*-recovered-N.mp4`),
    /// touching only what Reel wrote. Returns the recordings made (see `recover(in:logger:)`).
    @discardableResult
    public static func recoverPartFiles(in dir: String, logger: Logger) -> [String] {
        recover(in: dir, logger: logger).compactMap {
            if case let .recovered(file) = $0.outcome { return file }
            return nil
        }
    }

    /// Start-up recovery of every `*.mp4.part` in `dir`, one file at a time, each on its own (an
    /// error with one never stops the others):
    /// - a file another process holds the lock of (a live recording) is left alone;
    /// - one without Reel's signature (`PartSignature`) is left alone, with one warning naming it;
    /// - Reel's with nothing recorded is removed;
    /// - Reel's with media is finished (`MP4Finisher`, which cuts off only the incomplete
    ///   fragment the walk found at its end) and renamed without replacing anything;
    /// - Reel's that the walk or the finisher finds damaged is moved aside byte for byte as
    ///   `NAME.mp4.part.damaged` and reported once (its name no longer ends in `.mp4.part`).
    public static func recover(in dir: String, logger: Logger) -> [PartRecovery] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return [] }
        return names.sorted().filter { $0.hasSuffix(".mp4.part") }.map { name in
            let part = "\(dir)/\(name)"
            return PartRecovery(part: part, outcome: recoverOne(part, dir: dir, stem: String(name.dropLast(".mp4.part".count)), logger: logger))
        }
    }

    private static func recoverOne(_ part: String, dir: String, stem: String, logger: Logger) -> PartRecovery.Outcome {
        let contents: PartContents
        let before: Int64
        do {
            let fd = Sys.eintrSafe { open(part, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
            guard fd >= 0 else {
                let why = errno == ELOOP ? "it is a symbolic link" : "cannot open it: \(Errno.current)"
                logger.warning("left \(part) alone: \(why) (recovery handles only files reeld wrote)")
                return .leftAlone(why)
            }
            defer { Glibc.close(fd) }
            // A recording in progress (this or another reeld) holds an exclusive flock.
            if flock(fd, LOCK_SH | LOCK_NB) != 0, errno == EWOULDBLOCK {
                logger.notice("\(part) is being recorded by another process (it holds the file's lock); not recovering it")
                return .leftAlone("being recorded by another process")
            }
            var st = stat()
            before = fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
            contents = try partContents(fd: fd, path: part)
        } catch {
            logger.error("cannot recover \(part): \(error) (it stays as it is; recovery tries again at the next start)")
            return .leftAlone("\(error)")
        }
        switch contents {
        case let .notReels(why):
            logger.warning("left \(part) alone: it is not a recording of Reel's (\(why)); if it is not in use, move it out of \(dir)")
            return .leftAlone(why)
        case .noMedia:
            guard unlink(part) == 0 else {
                let why = "cannot remove it: \(Errno.current)"
                logger.error("\(part) holds no media, but \(why) (check the permissions of \(dir))")
                return .leftAlone(why)
            }
            logger.notice("removed crash-left \(part): it holds no media (\(before) bytes: the recording ended before its first fragment reached the disk)",
                          metadata: ["RECORDING": "\(part)"])
            return .removed
        case let .damaged(why):
            return moveAside(part, why: why, logger: logger)
        case .playable, .finished:
            break
        }
        let result: MP4Finisher.Result
        do {
            result = try MP4Finisher.finish(path: part)
        } catch where error.systemError != nil {
            // The disk, not the file: full, read-only or failing. The file stays a fragmented MP4 (cut
            // back to its complete fragments at most), tried again once the disk is put right.
            logger.error("cannot recover \(part): \(error) (it stays as it is; recovery tries again at the next start)",
                         metadata: ["RECORDING": "\(part)"])
            return .leftAlone(error.description)
        } catch {
            return moveAside(part, why: "\(error)", logger: logger)
        }
        for w in result.warnings { logger.warning("\(w)", metadata: ["RECORDING": "\(part)"]) }
        // The one hand-off path of every finished file (`Handoff`): its marker, the rename that never
        // replaces anything (to NAME-recovered-K.mp4 when NAME.mp4 is taken) and the directory syncs.
        let target: String
        do {
            target = try Handoff.place(part: part, final: "\(dir)/\(stem).mp4", by: .recovery, sync: true, logger: logger,
                                       alternative: { "\(dir)/\(stem)-recovered-\($0).mp4" }).path
        } catch {
            logger.error("\(part) was finished, but \(error) (check the permissions of \(dir))", metadata: ["RECORDING": "\(part)"])
            return .leftAlone("\(error)")
        }
        let kept = result.alreadyFinished ? before : result.moovOffset
        let what = result.alreadyFinished ? "it was finished already"
            : "\(result.fragments) fragments, \(result.chapters) chapter\(result.chapters == 1 ? "" : "s"), \(keepText(contents, before))"
        logger.notice("recovered crash-left recording \(part) as \(target) (\(what))",
                      metadata: RecordingLog.fields(.recovered, file: target, part: part,
                                                    more: ["RECORDING": "\(target)", "REEL_KEPT_BYTES": "\(kept)"]))
        return .recovered(file: target)
    }

    private static func keepText(_ c: PartContents, _ before: Int64) -> String {
        guard case let .playable(keep, _) = c else { return "" }
        return "\(keep) bytes of media kept, \(before - keep) bytes of an incomplete fragment dropped"
    }

    /// Moves a `.part` that cannot be finished aside, byte for byte, without replacing anything:
    /// `NAME.mp4.part.damaged` (or `.damaged-2`, ...). Recovery looks only at `*.mp4.part`, so it
    /// is reported this once.
    private static func moveAside(_ part: String, why: String, logger: Logger) -> PartRecovery.Outcome {
        var target = part + damagedSuffix
        var failed = "\(Errno.text(EEXIST)) up to \(target)"
        for k in 2...100 {
            do {
                try Sys.renameNoReplace(part, target)
                FileSyncer.syncDirectory(of: target, logger: logger)
                logger.error("cannot recover \(part): \(why); moved it aside unchanged as \(target), which recovery leaves alone from now on (it may still play up to the damage: try 'ffplay \(target)'; keep it or delete it)",
                              metadata: ["RECORDING": "\(part)"])
                return .movedAside(to: target, why: why)
            } catch where error.errno == EEXIST {
                target = part + damagedSuffix + "-\(k)"
            } catch {
                failed = error.reason
                break
            }
        }
        logger.error("cannot recover \(part): \(why); cannot move it aside as \(target) either (\(failed)), so it stays as it is and is reported again at the next start (move it out of the output directory)",
                      metadata: ["RECORDING": "\(part)"])
        return .leftAlone(why)
    }
}

/// Reads a file through one `PartWalk.window`-byte window (box headers are small and close
/// together), with pread: the walk costs one system call per box at most.
final class WindowedReader {
    private let fd: Int32
    private let size: Int64
    private let path: String
    private var buffer: [UInt8] = []
    private var at: Int64 = 0

    init(fd: Int32, size: Int64, path: String) { self.fd = fd; self.size = size; self.path = path }

    func read(_ offset: Int64, _ count: Int) throws -> [UInt8] {
        guard offset >= 0, count > 0, offset < size else { return [] }
        let want = Int(min(Int64(count), size - offset))
        if offset >= at, offset - at + Int64(want) <= Int64(buffer.count) {
            let from = Int(offset - at)
            return Array(buffer[from..<(from + want)])
        }
        let length = Int(min(Int64(max(want, PartWalk.window)), size - offset))
        var b = [UInt8](repeating: 0, count: length)
        var done = 0
        while done < length {
            // Safe: the pointer is into b, which has `length` bytes.
            let n = b.withUnsafeMutableBytes { p in Sys.eintrSafe { pread(fd, p.baseAddress! + done, length - done, off_t(offset) + off_t(done)) } }
            if n < 0 { throw RecorderFailure("cannot read \(path) at \(offset + Int64(done)): \(Errno.current)") }
            if n == 0 { break }
            done += n
        }
        buffer = Array(b[0..<done])
        at = offset
        return Array(buffer.prefix(want))
    }
}
