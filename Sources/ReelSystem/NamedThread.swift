import CGlibcShim
import Foundation

/// Starts Reel's own threads, each under its name where the kernel shows it (`top -H`, `perf`,
/// `/proc/PID/task/*/comm`: Foundation's `Thread.name` does not reach the kernel on Linux), and
/// at the scheduling priority its work asks for.
///
/// `.idle` (SCHED_IDLE) is for work that only has to keep up on average and may wait for the CPU
/// time nothing else wants: an unpaced run's sources and AAC encoder, which then run in the gaps
/// x264's own threads leave (its lookahead is a serial path that keeps x264 at ~1.7 of 2 cores)
/// instead of preempting them; docs/PERFORMANCE.md has the figures. Never a live recording's:
/// under load an idle thread can wait for seconds, and a live source or encoder that waits drops
/// samples.
package enum NamedThread {
    package enum Priority: Sendable { case normal, idle }

    /// Starts `body` on a new thread named `name` (at most 15 bytes are kept). If the kernel
    /// refuses the idle policy (a seccomp filter), the thread runs at normal priority: only the
    /// speed of an unpaced run depends on it.
    package static func start(_ name: String, priority: Priority = .normal, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            _ = creel_name_this_thread(name)
            if priority == .idle { _ = creel_run_this_thread_when_idle() }
            body()
        }
        thread.name = name
        thread.start()
    }
}
