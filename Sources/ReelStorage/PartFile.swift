import Foundation
import Glibc
import Logging
import ReelCore
import ReelMedia
import ReelSystem

/// One recording's file while it is written, NAME.mp4.part, and its end. It holds the writer
/// (`MP4Writer`), the lock that keeps another reeld's recovery off it, and the syncer that puts
/// each fragment on the disk (`fsync = fragment`); it finishes the file (a standard MP4, renamed
/// and handed on through `Handoff.place`), salvages it after a failed write or sync (cut back to
/// its last complete fragment, renamed), or removes it when every take was undone.
///
/// Rules:
/// - The writer's packets go in on two threads (video on the pipeline's, audio on the AAC
///   thread's); `writer` is read under `lock`, and replaced only by `restart` (an undo of take
///   1: the same path and inode, so the lock and the syncer hold).
/// - A failed fdatasync, seen by the sync thread, counts as a failed write (`takeSyncFailure`):
///   what was written may not be on the disk.
/// - The name says the file is complete only once its trailer is synced: `finish` closes the
///   syncer (its last sync) before the rename.
/// - After a failed write nothing more is written: `salvage` closes the writer without a write,
///   cuts the file back to its last complete fragment and renames it (removes it when no
///   fragment was complete), and says what was kept in one message.
///
/// @unchecked Sendable: every mutable field is under `lock`; `MP4Writer` and `FileSyncer` are
/// thread-safe themselves, the rest is immutable.
package final class PartFile: @unchecked Sendable {
    package let path: String
    package let finalPath: String
    private let logger: Logger
    private let lock = Monitor()
    private var current: MP4Writer
    private let syncer: FileSyncer?
    private let partLock: PartFileLock
    private var syncerClosed = false
    /// The write failure is a failed fdatasync, not a failed write.
    private var failedSyncing = false
    private var placedFile: FinishedFile?

    /// Creates `path` (never through a link, never over a file) with a writer for these streams.
    package init(path: String, finalPath: String, video: H264Encoder?, audio: AACStream?, fsync: FsyncPolicy,
                 audioLead: Int64, logger: Logger) throws {
        self.path = path
        self.finalPath = finalPath
        self.logger = logger
        // A fragment every 0.5 s of media: a crash loses at most that plus the encoder delay (< 1 s).
        current = try MP4Writer(path: path, video: video, audioStream: audio, fragmentMicros: 500_000, audioLead: audioLead)
        partLock = PartFileLock(path: path, logger: logger)
        // fsync = fragment: each fragment is synced by a thread of its own, so a power cut loses
        // at most about a second and the pipeline never waits on the disk.
        if fsync == .fragment {
            let syncer = try FileSyncer(path: path, logger: logger)
            current.onFragmentWritten = { syncer.request() }
            self.syncer = syncer
        } else { syncer = nil }
    }

    /// The writer now (a restart replaces it).
    package var writer: MP4Writer { lock.withLock { current } }

    /// The finished file as `Handoff.place` left it; nil when none was finished.
    package var placed: FinishedFile? { lock.withLock { placedFile } }

    /// The first failed write or sync; once set, nothing more is written.
    package var writeFailure: MediaError? { writer.writeFailure }

    /// Every take undone: the file starts again, empty (same path and inode), and is on the disk
    /// empty before the undo is answered.
    package func restart(video: H264Encoder?, audio: AACStream?) throws {
        try lock.withLock {
            let w = try MP4Writer(path: path, video: video, audioStream: audio, fragmentMicros: current.fragmentMicros,
                                  restart: true, audioLead: current.audioLead)
            if let syncer { w.onFragmentWritten = { syncer.request() } }
            current = w
        }
        try writer.sync("starting it again (undo of take 1)")
    }

    /// A failed fdatasync, seen by the sync thread, ends the recording as a failed write does
    /// (what was written may not be on the disk). True when it did (once).
    package func takeSyncFailure() -> Bool {
        lock.withLock {
            guard current.writeFailure == nil, let e = syncer?.failure else { return false }
            current.markFailed("cannot sync '\(path)' to disk: \(Errno.text(e))", systemError: e)
            failedSyncing = true
            return true
        }
    }

    /// The writer's trailer is out (`MP4Writer.finish`): the last sync, the standard MP4 (on its
    /// failure, logged, the fragmented file, which plays, is kept) and the rename.
    /// `videoEnd`: see `MP4Writer.finish(videoEnd:)`.
    package func finish(by: FinishedBy, videoEnd: Int64? = nil) throws -> FinishedFile? {
        try writer.finish(videoEnd: videoEnd)
        closeSyncer()  // the trailer is on disk before the name says the file is complete
        guard !takeSyncFailure() else { return nil }
        Storage.finishMP4(path, logger: logger)
        let f = try Handoff.place(part: path, final: finalPath, by: by, sync: syncer != nil, logger: logger)
        lock.withLock { placedFile = f }
        return f
    }

    /// Every take undone and stopped: no file is wanted (the writer's leftovers go with it).
    package func discard() {
        _ = try? writer.abandon()
        if unlink(path) != 0 { logger.warning("cannot remove \(path) (every take was undone): \(Errno.current)") }
        else { logger.info("every take of \(path) was undone: removed it") }
    }

    /// After a failed write: the file is closed without another write, cut back to its last
    /// complete fragment and renamed (or removed when no fragment was complete). Returns the file
    /// kept (nil: none; the .part path if it could not be cut or renamed) and the message.
    package func salvage(_ failure: MediaError) -> (file: String?, message: String) {
        closeSyncer()
        let dir = (finalPath as NSString).deletingLastPathComponent
        let code = failure.systemError ?? EIO
        let syncing = lock.withLock { failedSyncing }
        let verb = syncing ? "syncing" : "writing"
        func text(_ kept: WriteFailureText.Kept) -> String {
            WriteFailureText.message(errno: code, verb: verb, part: path, kept: kept, dir: dir)
        }
        let kept: (bytes: Int64, micros: Int64)
        do { kept = try writer.abandon() } catch {
            return (path, text(.unknown("\(error); it stays as \(path), which reeld makes playable at its next start")))
        }
        guard kept.bytes > 0 else {
            unlink(path)
            return (nil, text(.nothing))
        }
        if [ENOSPC, EDQUOT].contains(code), !syncing {
            // Out of space, not a failing disk: cutting the incomplete fragment off may have freed
            // the few hundred kB a standard MP4's index needs. If not, the finisher cuts its own
            // partial write off (logged) and the fragmented file, which plays, is kept.
            Storage.finishMP4(path, logger: logger)
        }
        let f: FinishedFile
        do { f = try Handoff.place(part: path, final: finalPath, by: .writeFailed, sync: syncer != nil, logger: logger) } catch {
            return (path, text(.unknown("\(error); reeld renames it at its next start")))
        }
        lock.withLock { placedFile = f }
        return (f.path, text(.prefix(micros: kept.micros, file: f.path)))
    }

    /// The end, however it came: the last sync and the lock's release. Idempotent.
    package func close() {
        closeSyncer()
        partLock.release()
    }

    /// Last sync and the syncer thread's end; logs what syncing cost. Idempotent.
    private func closeSyncer() {
        guard let syncer, lock.withLock({ () -> Bool in
            if syncerClosed { return false }
            syncerClosed = true
            return true
        }) else { return }
        let c = syncer.close()
        logger.debug("fsync of \(path): \(c.count) syncs, mean \(c.meanNs / 1000) us, max \(c.maxNs / 1000) us")
    }
}
