import CGlibcShim
import Foundation
import Glibc
import Logging
import ReelCore
import ReelMedia
import ReelSystem

/// Free space and crash recovery for the output directory.
public enum Storage {
    /// Bytes available to an unprivileged writer on the file system holding `dir`, or nil.
    public static func freeBytes(_ dir: String) -> Int64? {
        var st = statvfs()
        guard Sys.eintrSafe({ statvfs(dir, &st) }) == 0 else { return nil }
        return Int64(st.f_bavail) * Int64(st.f_frsize)
    }

    public static func megabytes(_ b: Int64) -> String { "\(b / 1_000_000) MB" }

    /// What a crash-left `.part` holds, from its complete top-level boxes.
    public enum PartContents: Equatable, Sendable {
        /// A movie header and media: playable up to `keep` bytes (complete boxes, a trailing
        /// `moof` whose `mdat` never arrived dropped).
        case playable(keep: Int64)
        /// Nothing was recorded into it: empty, or only the boxes written before the first
        /// fragment (ftyp, the placeholder, moov), possibly followed by a fragment cut short.
        case noMedia
        /// Not what reeld writes before its first fragment, yet no movie header: left alone.
        case unrecognised
    }

    /// Reads only box headers (never the media).
    public static func partContents(_ path: String) throws -> PartContents {
        guard let h = FileHandle(forReadingAtPath: path) else {
            throw RecorderFailure("cannot open \(path) for recovery: \(Errno.current)")
        }
        defer { try? h.close() }
        let size = Int64(try h.seekToEnd())
        var offset: Int64 = 0
        var end: Int64 = 0
        var sawMoov = false, sawMdat = false, onlyHeaders = true
        while offset + 8 <= size {
            try h.seek(toOffset: UInt64(offset))
            guard let head = try h.read(upToCount: 16), let box = MP4BoxHeader([UInt8](head)) else { break }
            guard box.size >= 8, offset + box.size <= size else { break }  // size 0 (to end) or cut short
            offset += box.size
            switch box.type {
            case "moov": sawMoov = true
            case "mdat": sawMdat = true
            case "ftyp", "free", "skip", "moof": break
            default: onlyHeaders = false
            }
            if box.type != "moof" { end = offset }
        }
        if sawMoov && sawMdat { return .playable(keep: end) }
        return !sawMdat && onlyHeaders ? .noMedia : .unrecognised
    }

    /// Makes the fragmented `path` a standard MP4 (ftyp, mdat, moov: `MP4Finisher`), or leaves a file
    /// already finished as it is. A failure leaves the fragmented file, which plays: logged, not thrown.
    @discardableResult
    public static func finishMP4(_ path: String, logger: Logger) -> Bool {
        let started = SystemClock.now()
        do {
            let r = try MP4Finisher.finish(path: path)
            let took = (SystemClock.now() - started) / 1_000_000
            if r.alreadyFinished { logger.info("\(path) is already a finished MP4") }
            else { logger.info("finished \(path) as a standard MP4 (\(r.fragments) fragments, \(r.samples) samples, \(r.chapters) chapter\(r.chapters == 1 ? "" : "s"), a \(r.moovBytes)-byte moov) in \(took) ms") }
            for w in r.warnings { logger.warning("\(w)", metadata: ["RECORDING": "\(path)"]) }
            return true
        } catch {
            logger.error("\(error)", metadata: ["RECORDING": "\(path)"])
            return false
        }
    }

    /// Makes every `*.mp4.part` in `dir` playable (truncated to its complete boxes), finishes it
    /// (`finishMP4`) and renames it to `*.mp4` (or `*-recovered-N.mp4` if that exists). Returns the files made.
    @discardableResult
    public static func recoverPartFiles(in dir: String, logger: Logger) -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return [] }
        var made: [String] = []
        for name in names.sorted() where name.hasSuffix(".mp4.part") {
            let part = "\(dir)/\(name)"
            if PartFileLock.isLocked(part) {
                logger.notice("\(part) is being recorded by another process (it holds the file's lock); not recovering it")
                continue
            }
            do {
                let before = (try? FileManager.default.attributesOfItem(atPath: part)[.size] as? Int64) ?? nil
                let keep: Int64
                switch try partContents(part) {
                case let .playable(k): keep = k
                case .noMedia:
                    // Killed before its first fragment reached the disk: there is nothing to keep,
                    // and a .part left behind would be reported at every start.
                    guard unlink(part) == 0 else { throw RecorderFailure("cannot remove \(part): \(Errno.current)") }
                    logger.notice("removed crash-left \(part): it holds no media (\(before ?? 0) bytes: the recording ended before its first fragment reached the disk)",
                                  metadata: ["RECORDING": "\(part)"])
                    continue
                case .unrecognised:
                    logger.warning("crash-left \(part) holds no playable media (no movie header, and boxes reeld does not write before media); left as is")
                    continue
                }
                if truncate(part, off_t(keep)) != 0 {
                    throw RecorderFailure("cannot truncate \(part): \(Errno.current)")
                }
                // A standard MP4 like a recording stopped normally (or already one: a crash after finishing).
                finishMP4(part, logger: logger)
                let stem = String(name.dropLast(".mp4.part".count))
                var target = "\(dir)/\(stem).mp4"
                var k = 1
                while FileManager.default.fileExists(atPath: target) { target = "\(dir)/\(stem)-recovered-\(k).mp4"; k += 1 }
                if rename(part, target) != 0 {
                    throw RecorderFailure("cannot rename \(part) to \(target): \(Errno.current)")
                }
                let cut = (before ?? keep) - keep
                logger.notice("recovered crash-left recording \(part) as \(target) (\(keep) bytes kept, \(cut) bytes of an incomplete fragment dropped)",
                              metadata: RecordingLog.fields(.recovered, file: target, part: part,
                                                            more: ["RECORDING": "\(target)", "REEL_KEPT_BYTES": "\(keep)", "REEL_DROPPED_BYTES": "\(cut)"]))
                made.append(target)
            } catch {
                logger.error("cannot recover \(part): \(error) (it stays; a fragmented MP4 plays up to its last complete fragment)")
            }
        }
        return made
    }
}
