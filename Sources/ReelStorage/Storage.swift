import CGlibcShim
import Foundation
import Glibc
import Logging
import ReelCore
import ReelMedia
import ReelSystem

/// Free space and crash recovery (`Recovery.swift`) for the output directory.
public enum Storage {
    /// Bytes available to an unprivileged writer on the file system holding `dir`, or nil.
    public static func freeBytes(_ dir: String) -> Int64? {
        var st = statvfs()
        guard Sys.eintrSafe({ statvfs(dir, &st) }) == 0 else { return nil }
        return Int64(st.f_bavail) * Int64(st.f_frsize)
    }

    public static func megabytes(_ b: Int64) -> String { "\(b / 1_000_000) MB" }

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
}
