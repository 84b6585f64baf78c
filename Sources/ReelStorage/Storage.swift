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

/// Runs the `on_finish` program after a completed recording: posix_spawn, no shell, stdin from
/// /dev/null, stdout/stderr to reeld's (the journal), killed after the timeout, status logged.
public enum FinishHook {
    /// Hooks still running, so shutdown can let them finish (systemd would kill them with reeld).
    private static let running = Monitor()
    nonisolated(unsafe) private static var runningPids: [pid_t: String] = [:]  // guarded by `running`

    /// Waits until no hook is running, at most until `deadline` (shutdown must end within the
    /// unit's TimeoutStopSec, whatever on_finish_timeout says): hooks still running then are
    /// killed, said in the log, and reaped.
    public static func waitForRunning(until deadline: Nanos, logger: Logger) {
        running.withLock {
            if !runningPids.isEmpty { logger.notice("waiting for \(runningPids.count) on_finish program(s) to finish") }
            while !runningPids.isEmpty, running.wait(until: deadline) {}
            guard !runningPids.isEmpty else { return }
            for (pid, what) in runningPids {
                logger.warning("on_finish: \(what) still running at shutdown; killing it (reeld must exit before systemd's TimeoutStopSec)")
                kill(pid, SIGKILL)
            }
            // A killed child exits at once; its reaper thread removes it.
            while !runningPids.isEmpty, running.wait(until: SystemClock.now() + nanosPerSecond) {}
        }
    }

    public static func run(_ argv: [String], file: String, timeoutNs: Nanos, logger: Logger) {
        guard let program = argv.first else { return }
        let args = argv + [file]
        var spawned: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        var attr = posix_spawnattr_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attr)
        defer { posix_spawn_file_actions_destroy(&actions); posix_spawnattr_destroy(&attr) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // The hook inherits stdin (/dev/null), stdout and stderr (the journal) and nothing else:
        // not the control socket, a client's connection, the .part file or a wake pipe, whatever
        // a thread opened without O_CLOEXEC at the instant of the spawn.
        creel_spawn_closefrom(&actions, 3)
        // reeld ignores SIGPIPE/SIGTERM/SIGINT/SIGHUP (signal sources); the hook gets defaults.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGTERM, SIGINT, SIGHUP] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        // Unsafe: strdup'd C strings live until freed below, after posix_spawn has copied them.
        var cargs: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { cargs.forEach { free($0) } }
        let rc = posix_spawn(&spawned, program, &actions, &attr, &cargs, environ)
        guard rc == 0 else {
            logger.error("on_finish: cannot run \(program): \(Errno.text(rc)) (check on_finish in reeld.toml: an absolute path to an executable)")
            return
        }
        let pid = spawned
        running.withLock { runningPids[pid] = "\(program) \(file)" }
        logger.info("on_finish: started \(program) \(file) (pid \(pid))", metadata: ["RECORDING": "\(file)"])
        let started = SystemClock.now()
        let done = Monitor()
        nonisolated(unsafe) var exited = false  // guarded by `done`
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(timeoutNs))) {
            done.withLock {
                // The child is not reaped until `exited` is set, so `pid` cannot have been reused.
                if !exited {
                    logger.warning("on_finish: \(program) still running after \(timeoutNs / nanosPerSecond) s; killing it (raise on_finish_timeout?)")
                    kill(pid, SIGKILL)
                }
            }
        }
        NamedThread.start("reel-hook-wait") {
            var info = siginfo_t()
            // Wait without reaping (WNOWAIT), mark it exited, then reap: see the timer above.
            Sys.eintrSafe { waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) }
            done.withLock { exited = true }
            var status: Int32 = 0
            Sys.eintrSafe { waitpid(pid, &status, 0) }
            let secs = formatDuration(SystemClock.now() - started)
            if status & 0x7f == 0 {
                let code = (status >> 8) & 0xff
                if code == 0 { logger.notice("on_finish: \(program) \(file) exited 0 after \(secs)", metadata: ["RECORDING": "\(file)"]) }
                else { logger.error("on_finish: \(program) \(file) exited with status \(code) after \(secs)", metadata: ["RECORDING": "\(file)"]) }
            } else {
                logger.error("on_finish: \(program) \(file) killed by signal \(status & 0x7f) after \(secs)", metadata: ["RECORDING": "\(file)"])
            }
            running.withLock { runningPids[pid] = nil; running.broadcast() }
        }
    }
}
