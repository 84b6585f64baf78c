import CGlibcShim
import Foundation
import Glibc
import Logging
import ReelCore
import ReelSystem

/// Runs the `on_finish` program after a completed recording: posix_spawn, no shell, stdin from
/// /dev/null, stdout/stderr to reeld's (the journal), in a process group of its own that is
/// killed whole after the timeout (a grandchild too), at the default scheduling policy and at
/// nice 0 or above (never reeld's Nice=-10), status logged. `Handoff.handOn` is its one caller.
public enum FinishHook {
    /// Hooks still running, so shutdown can let them finish (systemd would kill them with reeld).
    private static let running = Monitor()
    /// Each running hook's pid (also its process group) and what it is; `killedAtShutdown` once
    /// `waitForRunning` killed it (its `whenDone` is then not called). Guarded by `running`.
    nonisolated(unsafe) private static var runningPids: [pid_t: (what: String, killedAtShutdown: Bool)] = [:]

    /// Waits until no hook is running, at most until `deadline` (shutdown must end within the
    /// unit's TimeoutStopSec, whatever on_finish_timeout says): hooks still running then are
    /// killed with their process group, said in the log, and reaped.
    public static func waitForRunning(until deadline: Nanos, logger: Logger) {
        running.withLock {
            if !runningPids.isEmpty { logger.notice("waiting for \(runningPids.count) on_finish program(s) to finish") }
            while !runningPids.isEmpty, running.wait(until: deadline) {}
            guard !runningPids.isEmpty else { return }
            for (pid, hook) in runningPids {
                logger.warning("on_finish: \(hook.what) still running at shutdown; killing it and its process group (reeld must exit before systemd's TimeoutStopSec; it runs again at the next start)")
                runningPids[pid]?.killedAtShutdown = true
                // Not reaped yet (its reaper thread waits for this lock), so the group's id is still its own.
                kill(-pid, SIGKILL)
            }
            // A killed child exits at once; its reaper thread removes it.
            while !runningPids.isEmpty, running.wait(until: SystemClock.now() + nanosPerSecond) {}
        }
    }

    /// Runs `argv` with `file` appended and `environment` added to reeld's. `whenDone` runs once
    /// the program has exited or been killed at `timeoutNs`, or could not be started; not when
    /// `waitForRunning` killed it at shutdown.
    public static func run(_ argv: [String], file: String, environment: [String: String] = [:], timeoutNs: Nanos,
                           logger: Logger, whenDone: @escaping @Sendable () -> Void = {}) {
        guard let program = argv.first else { whenDone(); return }
        let args = argv + [file]
        // reeld's environment as it is now (it unset NOTIFY_SOCKET and the watchdog's), ours added.
        var envp: [String] = []
        // Unsafe: environ is a NULL-terminated array of C strings, read (not kept) before the next setenv.
        var entry = environ
        while let c = entry.pointee {
            let text = String(cString: c)
            if !environment.keys.contains(where: { text.hasPrefix($0 + "=") }) { envp.append(text) }
            entry += 1
        }
        envp += environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let childEnvironment = envp
        // Spawned from a thread of its own, which first takes the default scheduling: the child
        // inherits the spawning thread's policy and nice, and posix_spawn cannot set nice.
        let spawned = Promise<Int32>()  // the pid, or minus the errno
        NamedThread.start("reel-hook") {
            let resetFailed = creel_default_scheduling_for_children()
            if resetFailed != 0 {
                logger.notice("on_finish: \(program) inherits reeld's scheduling priority (cannot reset this thread's: \(Errno.text(resetFailed)))")
            }
            let pid = spawn(program, args, childEnvironment)
            spawned.fulfill(pid)
            guard pid > 0 else { return }
            reap(pid, program: program, file: file, timeoutNs: timeoutNs, logger: logger, whenDone: whenDone)
        }
        let pid = spawned.wait(until: nil) ?? -EIO
        guard pid > 0 else {
            logger.error("on_finish: cannot run \(program): \(Errno.text(-pid)) (check on_finish in reeld.toml: an absolute path to an executable)")
            whenDone()
            return
        }
        logger.info("on_finish: started \(program) \(file) (pid \(pid))", metadata: ["RECORDING": "\(file)"])
    }

    /// posix_spawn in a new process group, stdio only, default signal dispositions and an empty
    /// mask; registered in `runningPids` before this returns. The pid, or minus the errno.
    private static func spawn(_ program: String, _ args: [String], _ envp: [String]) -> Int32 {
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
        // Its own process group (pgid = its pid), so the timeout kills whatever it started too.
        posix_spawnattr_setpgroup(&attr, 0)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        // Unsafe: strdup'd C strings live until freed below, after posix_spawn has copied them.
        var cargs: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        var cenv: [UnsafeMutablePointer<CChar>?] = envp.map { strdup($0) } + [nil]
        defer { cargs.forEach { free($0) }; cenv.forEach { free($0) } }
        // Registered under the lock, so shutdown sees it from the instant it exists.
        return running.withLock {
            let rc = posix_spawn(&spawned, program, &actions, &attr, &cargs, &cenv)
            guard rc == 0 else { return -rc }
            runningPids[spawned] = ("\(program) \(args.last ?? "")", false)
            return spawned
        }
    }

    /// On the hook's thread: waits for the child, kills its process group at the timeout, logs
    /// how it ended, then `whenDone` (unless shutdown killed it).
    private static func reap(_ pid: pid_t, program: String, file: String, timeoutNs: Nanos, logger: Logger,
                             whenDone: @escaping @Sendable () -> Void) {
        let started = SystemClock.now()
        let done = Monitor()
        nonisolated(unsafe) var exited = false  // guarded by `done`
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(timeoutNs))) {
            done.withLock {
                // The child is not reaped until `exited` is set, so `pid` (and its group's id) cannot have been reused.
                if !exited {
                    logger.warning("on_finish: \(program) still running after \(timeoutNs / nanosPerSecond) s; killing it and its process group (raise on_finish_timeout?)")
                    kill(-pid, SIGKILL)
                }
            }
        }
        var info = siginfo_t()
        // Wait without reaping (WNOWAIT), mark it exited, then reap: see the timer above.
        Sys.eintrSafe { waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) }
        done.withLock { exited = true }
        var status: Int32 = 0
        let killedAtShutdown = running.withLock {
            // Reaped under the lock: waitForRunning signals the group only while it is not.
            Sys.eintrSafe { waitpid(pid, &status, 0) }
            return runningPids[pid]?.killedAtShutdown ?? false
        }
        let secs = formatDuration(SystemClock.now() - started)
        if status & 0x7f == 0 {
            let code = (status >> 8) & 0xff
            if code == 0 { logger.notice("on_finish: \(program) \(file) exited 0 after \(secs)", metadata: ["RECORDING": "\(file)"]) }
            else { logger.error("on_finish: \(program) \(file) exited with status \(code) after \(secs)", metadata: ["RECORDING": "\(file)"]) }
        } else {
            logger.error("on_finish: \(program) \(file) killed by signal \(status & 0x7f) after \(secs)", metadata: ["RECORDING": "\(file)"])
        }
        if !killedAtShutdown { whenDone() }
        running.withLock { runningPids[pid] = nil; running.broadcast() }
    }
}
