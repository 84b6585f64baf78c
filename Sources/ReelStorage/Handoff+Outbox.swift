import Foundation
import Glibc
import Logging
import ReelCore
import ReelSystem

/// The hand-off's outbox step (`outbox_dir`): the hard link, the marker's `linked` line, and the
/// `.NAME.unqueued` marker a failed link leaves, which keeps `keep_free_mb` off the file (it has
/// one link and no outbox entry, as an uploaded recording has) and makes the next start try again.
extension Handoff {
    static let unqueuedSuffix = ".unqueued"
    /// The hand-off marker's line saying the file was linked into the outbox.
    static let linkedLine = "linked"

    /// `dir/.NAME.unqueued` for the finished file `dir/NAME`.
    package static func unqueuedMarker(for file: String) -> String {
        let (dir, name) = Outbox.split(file)
        return "\(dir)/.\(name)\(unqueuedSuffix)"
    }

    /// Step 3: the hard link OUTBOX/NAME (`Outbox.link`), then `linked` appended to the hand-off
    /// marker (not synced: lost to a power cut, the file is linked again at the next start). A
    /// failure is logged (REEL_EVENT=outbox-failed) and reported to `failed`, and `.NAME.unqueued`
    /// is created; the file stays where it is. Returns whether the file is in the outbox.
    @discardableResult
    static func linkIntoOutbox(_ file: FinishedFile, outbox: Outbox, marker: String?, logger: Logger,
                               failed: (String) -> Void) -> Bool {
        switch outbox.link(file.path) {
        case let .linked(to), let .alreadyLinked(to):
            logger.info("\(file.path) waits for upload: linked as \(to)",
                        metadata: RecordingLog.fields(.queued, file: file.path, more: ["RECORDING": "\(file.path)", "REEL_OUTBOX_FILE": "\(to)"]))
            if TestHooks.handoffStopAfter == "link" { _exit(99) }
            guard let marker else { return true }
            let fd = Sys.eintrSafe { open(marker, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC) }
            if fd >= 0 {
                let text = Array("\(linkedLine)\n".utf8)
                // Unsafe: the array's storage lives for the call.
                _ = text.withUnsafeBytes { Sys.writeFully(fd, $0) }
                Sys.close(fd)
            }
            return true
        case let .failed(why):
            let unqueued = unqueuedMarker(for: file.path)
            var held = "keep_free_mb leaves it alone while \(unqueued) exists, and reeld tries the link again at its next start"
            do { Sys.close(try Sys.createExclusive(unqueued, mode: 0o600)) } catch where error.errno == EEXIST {
            } catch {
                held = "and \(unqueued) cannot be created (\(error.reason)), so keep_free_mb could take it for an uploaded recording: link it by hand"
            }
            FileSyncer.syncDirectory(of: unqueued, logger: logger)
            logger.error("\(why); the recording stays in its directory, not queued for upload (\(held))",
                         metadata: RecordingLog.fields(.outboxFailed, file: file.path, more: ["RECORDING": "\(file.path)"]))
            failed(why)
            return false
        }
    }

    /// At start-up: each file a failed link left `.NAME.unqueued` for is linked again; its marker
    /// goes once the file is in the outbox (or gone).
    static func relinkUnqueued(in dir: String, outbox: Outbox, logger: Logger, failed: (String) -> Void) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        for name in names.sorted() where name.hasPrefix(".") && name.hasSuffix(unqueuedSuffix) {
            let finalName = String(name.dropFirst().dropLast(unqueuedSuffix.count))
            guard !finalName.isEmpty, !finalName.contains("/"), isRegularFile("\(dir)/\(name)") else { continue }
            let final = "\(dir)/\(finalName)"
            if !isRegularFile(final) || linkIntoOutbox(FinishedFile(path: final, by: .recovery), outbox: outbox, marker: nil, logger: logger, failed: failed) {
                unlink("\(dir)/\(name)")
            }
        }
    }
}
