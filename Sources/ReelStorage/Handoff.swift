import Foundation
import Glibc
import Logging
import ReelCore
import ReelSystem

/// How a finished file came to be finished; its on_finish program sees it as `REEL_FINISHED_BY`.
public enum FinishedBy: String, Sendable, CaseIterable {
    /// A stop: `reelctl stop`, SIGTERM, min_free_mb, the end of a one-shot's --duration or file.
    case stop
    /// The length cap (`max_duration`, `reelctl start --max-duration`).
    case cap
    /// A capture source failed (a camera unplugged): finished early, up to the failure.
    case sourceFailed = "source-failed"
    /// A write or sync failed (a full disk, a quota, an I/O error): cut back to the last complete fragment.
    case writeFailed = "write-failed"
    /// The pipeline failed (an encoder error): finished with what was written before.
    case error
    /// Made at start-up from a `.part` a crash, a watchdog kill or a power cut left.
    case recovery
}

/// A finished file on its way to on_finish: where it is and how it was finished.
public struct FinishedFile: Sendable, Equatable {
    public let path: String
    public let by: FinishedBy
    public init(path: String, by: FinishedBy) { self.path = path; self.by = by }
}

/// The one way a finished file is handed on, however it was finished (stop, the cap, a failed
/// source or write, start-up recovery):
///
/// 1. a marker `.NAME.handoff` (holding how it was finished) is created in the output directory
///    and the directory synced (an empty marker, after a power cut, counts as `recovery`);
/// 2. `NAME.part` is renamed to `NAME`, never replacing anything there (the next free name
///    `alternative(k)` instead) and the directory synced (`place`);
/// 3. with `outbox_dir`, the file is hard-linked into the outbox and the outbox synced (`Outbox.link`),
///    then the marker gets a line `linked`;
/// 4. on_finish runs (`handOn`) and the marker is removed once it has exited (or been killed at
///    `on_finish_timeout`).
///
/// A crash between 2 and 4 (or while the hook runs, which systemd then kills with reeld) leaves
/// the marker: the next start links the file (unless the marker says `linked`) and runs on_finish
/// for it (`resume`), with `REEL_RECOVERED=1`. So each finished file reaches the outbox and
/// on_finish once, and again only when a crash interrupted it (a crash between the link and the
/// `linked` line can link a file the uploader already took: it is uploaded twice, to the same name).
/// While the marker exists, `keep_free_mb` never deletes the file.
public enum Handoff {
    static let markerSuffix = ".handoff"

    /// `dir/.NAME.handoff` for the finished file `dir/NAME`.
    package static func marker(for file: String) -> String {
        let (dir, name) = split(file)
        return "\(dir)/.\(name)\(markerSuffix)"
    }

    /// The finished file a marker's name stands for, or nil if `name` is not a marker's.
    package static func finishedName(ofMarker name: String) -> String? {
        guard name.hasPrefix("."), name.hasSuffix(markerSuffix), name.utf8.count > 1 + markerSuffix.utf8.count else { return nil }
        let inner = String(name.dropFirst().dropLast(markerSuffix.count))
        return inner.contains("/") || inner == "." || inner == ".." ? nil : inner
    }

    /// `dir/stem-(k+1).ext` for `dir/stem.ext`: the names a finished file takes, k = 1, 2, ...,
    /// when its own is taken.
    public static func numbered(_ file: String) -> (Int) -> String {
        let (dir, name) = split(file)
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        let stem = dot.map { String(name[..<$0]) } ?? name, ext = dot.map { String(name[$0...]) } ?? ""
        return { "\(dir)/\(stem)-\($0 + 1)\(ext)" }
    }

    private static func split(_ path: String) -> (dir: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let dir = String(path[..<slash])
        return (dir.isEmpty ? "/" : dir, String(path[path.index(after: slash)...]))
    }

    /// Steps 1 and 2: the marker, then `part` renamed to `final` (or, if a file or link is there,
    /// to the first free `alternative(k)`, k = 1...99), never replacing anything, with the
    /// directory synced after each when `sync` (fsync != "none"). Returns where the file is. A
    /// marker that cannot be written is logged and the file placed anyway (only a crash before
    /// its hook would then skip the hook). Throws when the rename fails (the .part stays).
    public static func place(part: String, final: String, by: FinishedBy, sync: Bool, logger: Logger,
                             alternative: ((Int) -> String)? = nil) throws -> FinishedFile {
        let next = alternative ?? numbered(final)
        var target = final
        for k in 1...100 {
            let marker = marker(for: target)
            let marked = writeMarker(marker, by: by, logger: logger)
            if marked, sync { FileSyncer.syncDirectory(of: marker, logger: logger) }
            do {
                try Sys.renameNoReplace(part, target)
            } catch let e where e.errno == EEXIST && k < 100 {
                if marked { unlink(marker) }
                let taken = target
                target = next(k)
                logger.warning("\(taken) appeared while \(part) was recorded: \(Sys.occupant(taken)); Reel never replaces a file, so the recording goes to \(target)")
                continue
            } catch {
                if marked { unlink(marker) }
                throw RecorderFailure("cannot rename \(part) to \(target): \(error.reason) (it stays as \(part), which reeld finishes at its next start)")
            }
            if sync { FileSyncer.syncDirectory(of: target, logger: logger) }
            if TestHooks.handoffStopAfter == "rename" { _exit(99) }
            return FinishedFile(path: target, by: by)
        }
        preconditionFailure("unreachable: the last attempt returns or throws")
    }

    /// Creates the marker (removing one a crash left for the same name: a name, never what it
    /// points to) holding `by`. False, logged, when it cannot be written.
    private static func writeMarker(_ path: String, by: FinishedBy, logger: Logger) -> Bool {
        if unlink(path) != 0, errno != ENOENT {
            logger.warning("cannot remove the stale hand-off marker \(path): \(Errno.current)")
        }
        do {
            let fd = try Sys.createExclusive(path, mode: 0o600)
            defer { Sys.close(fd) }
            let text = Array("\(by.rawValue)\n".utf8)
            // Unsafe: the array's storage lives for the call.
            if let e = text.withUnsafeBytes({ Sys.writeFully(fd, $0).errno }) { throw SystemError(call: "write", errno: e) }
            // Not fsynced: the directory sync in `place` makes its name durable, and a marker a
            // power cut leaves empty still hands its file on (as `recovery`). One sync less per file.
            return true
        } catch {
            let why = Sys.createFailure(path, errno: (error as? SystemError)?.errno ?? EIO,
                                        fix: "on_finish still runs, but a crash before it would skip it")
            logger.warning("hand-off marker: \(why)")
            unlink(path)
            return false
        }
    }

    /// Steps 3 and 4: with `outbox`, the hard link (`linkIntoOutbox`; skipped when the marker says
    /// `linked`, a failure reported to `linkFailed`), then the on_finish program for `file`
    /// (nothing when `hook` is empty) with `REEL_FINISHED_BY` and `REEL_RECOVERED` (1: handed on at
    /// a later start, after a crash); the marker is removed once it has exited or been killed at
    /// its timeout. A hook killed at shutdown keeps its marker, so the next start runs it again.
    public static func handOn(_ file: FinishedFile, recovered: Bool, hook: [String], timeoutNs: Nanos, outbox: Outbox? = nil,
                              logger: Logger, linkFailed: @Sendable (String) -> Void = { _ in }) {
        let marker = marker(for: file.path)
        if let outbox, !(readMarker(marker)?.linked ?? false) {
            linkIntoOutbox(file, outbox: outbox, marker: marker, logger: logger, failed: linkFailed)
        }
        guard !hook.isEmpty else {
            removeMarker(marker, logger: logger)
            return
        }
        FinishHook.run(hook, file: file.path, environment: ["REEL_FINISHED_BY": file.by.rawValue, "REEL_RECOVERED": recovered ? "1" : "0"],
                       timeoutNs: timeoutNs, logger: logger, whenDone: { removeMarker(marker, logger: logger) })
    }

    private static func removeMarker(_ path: String, logger: Logger) {
        if unlink(path) != 0, errno != ENOENT { logger.warning("cannot remove the hand-off marker \(path): \(Errno.current) (remove it, or on_finish runs again at the next start)") }
    }

    /// At start-up, after recovery: hands on every file whose hand-off a crash interrupted (its
    /// marker is still in `dir`) and every file in `recovered` (made by recovery), each once, with
    /// `REEL_RECOVERED=1`. A marker whose file is gone is removed. With `outbox`, each file a failed
    /// link left `.NAME.unqueued` for is linked again (`relinkUnqueued`). Returns the files handed on.
    @discardableResult
    public static func resume(in dir: String, recovered: [String], hook: [String], timeoutNs: Nanos, outbox: Outbox? = nil,
                              logger: Logger, linkFailed: @Sendable (String) -> Void = { _ in }) -> [FinishedFile] {
        var files: [FinishedFile] = []
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        for name in names.sorted() {
            guard let finalName = finishedName(ofMarker: name) else { continue }
            let marker = "\(dir)/\(name)", final = "\(dir)/\(finalName)"
            guard isRegularFile(marker) else {
                logger.warning("\(marker) looks like a hand-off marker but is not a regular file; left alone (remove it)")
                continue
            }
            guard isRegularFile(final) else {
                logger.notice("hand-off marker \(marker): \(final) is gone (moved away before its on_finish ran); removing the marker")
                removeMarker(marker, logger: logger)
                continue
            }
            let by = readMarker(marker)?.by ?? .recovery
            logger.notice("\(final) was finished (\(by.rawValue)) but a crash came before its on_finish had run; handing it on now")
            files.append(FinishedFile(path: final, by: by))
        }
        for p in recovered where !files.contains(where: { $0.path == p }) { files.append(FinishedFile(path: p, by: .recovery)) }
        for f in files { handOn(f, recovered: true, hook: hook, timeoutNs: timeoutNs, outbox: outbox, logger: logger, linkFailed: linkFailed) }
        if let outbox { relinkUnqueued(in: dir, outbox: outbox, logger: logger, failed: linkFailed) }
        return files
    }

    static func isRegularFile(_ path: String) -> Bool {
        var st = stat()
        // Unsafe: lstat fills the local stat; the path's C string lives for the call only.
        return lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG
    }

    /// How the marker says its file was finished (its first line), and whether it was linked into
    /// the outbox (a later line `linked`); at most 32 bytes read, never through a link. nil when
    /// it cannot be read; `by` nil when its first line names no `FinishedBy`.
    static func readMarker(_ path: String) -> (by: FinishedBy?, linked: Bool)? {
        let fd = Sys.eintrSafe { open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        defer { Sys.close(fd) }
        var buf = [UInt8](repeating: 0, count: 32)
        // Unsafe: read writes at most buf.count bytes into the array's own storage.
        let n = Sys.eintrSafe { buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) } }
        guard n >= 0 else { return nil }
        let lines = String(decoding: buf.prefix(n), as: UTF8.self).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        return (lines.first.flatMap { FinishedBy(rawValue: $0) }, lines.dropFirst().contains(linkedLine))
    }
}
