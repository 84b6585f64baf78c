import Synchronization

/// systemd's `STATUS=` line, sent once per change by whoever sees the change first: the
/// recorder at a state change, the supervisor each second while recording (its clock), or a
/// stall report. Created before both, so each gets it at init and neither needs the other.
public final class StatusChannel: Sendable {
    private let notifier: Notifier
    private let last = Mutex("")

    public init(notifier: Notifier) { self.notifier = notifier }

    /// Sends `line` now (a state change or a stall), and remembers it.
    public func send(_ line: String) {
        last.withLock { $0 = line }
        notifier.send("STATUS=\(line)")
    }

    /// Sends `line` only if it differs from the last line sent.
    public func sendIfChanged(_ line: String) {
        let changed = last.withLock { last in
            guard line != last else { return false }
            last = line
            return true
        }
        if changed { notifier.send("STATUS=\(line)") }
    }

    /// Forgets the last line, so the next `sendIfChanged` sends whatever it is.
    public func forget() { last.withLock { $0 = "" } }
}
