import Dispatch
import Foundation
import Glibc
import Logging
import Synchronization
import XCTest

@testable import ReelControl
import ReelSystem

// MARK: - Temporary socket directories

/// A fresh directory under /tmp (short, so socket paths stay under 108 bytes), removed on deinit.
final class TempDir {
    let path: String

    init() {
        var template = Array("/tmp/reel-ctl-XXXXXX".utf8CString)
        // Unsafe: mkdtemp rewrites the NUL-terminated template in place within its length.
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: errno \(errno)")
        // Unsafe: the template is NUL-terminated (utf8CString) and mkdtemp kept its length.
        path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    func socket(_ name: String = "reeld.sock") -> String { path + "/" + name }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

// MARK: - A fake recorder

/// A small state machine standing in for the recorder. `stop` can be held at a gate so tests
/// can prove a slow handler blocks nobody else.
final class FakeRecorder: ControlHandler {
    struct State {
        var state: RecorderState = .idle
        var file: String?
        var segments: [SegmentInfo] = []
        var lastFile: String?
        var calls: [Command] = []
        var holdStop = false
        /// Answer `status` on the server's I/O thread (`quickReply`), as reeld's recorder does.
        var quickStatus = false
        var quickCalls = 0
        /// Answer the listing commands with a bare success, as a reeld of another version might.
        var bareReplies = false
        /// Answer `snapshot` with a JPEG of this many bytes (nil: snapshots fail, as without a camera).
        var snapshotBytes: Int?
    }

    let state = Mutex(State())
    /// Signalled when a held `stop` has entered the handler.
    let stopEntered = DispatchSemaphore(value: 0)
    /// Signal to let a held `stop` finish.
    let stopRelease = DispatchSemaphore(value: 0)
    /// Signalled when any `stop` returns from the handler.
    let stopReturned = DispatchSemaphore(value: 0)

    var calls: [Command] { state.withLock { $0.calls } }

    func holdNextStop() { state.withLock { $0.holdStop = true } }

    func status(_ s: State) -> StatusInfo {
        StatusInfo(state: s.state, file: s.file, segments: s.segments,
                   recordedNs: s.segments.reduce(0) { $0 + $1.durationNs },
                   frames: Int64(s.segments.count) * 60, droppedFrames: 1, audioSamples: Int64(s.segments.count) * 96_000,
                   lastFile: s.lastFile, lastError: nil,
                   video: "test 640x360 30/1 yuyv", audio: "test 48000 Hz 1 ch", uptimeNs: 5_000_000_000)
    }

    func quickReply(_ request: Request) -> Reply? {
        state.withLock { s -> Reply? in
            guard s.quickStatus, request.cmd == .status else { return nil }
            s.quickCalls += 1
            return .success(status: status(s))
        }
    }

    func handle(_ request: Request) -> Reply {
        let hold = state.withLock { s -> Bool in
            s.calls.append(request.cmd)
            if request.cmd == .stop, s.holdStop {
                s.holdStop = false
                return true
            }
            return false
        }
        if hold {
            stopEntered.signal()
            stopRelease.wait()
        }
        defer { if request.cmd == .stop { stopReturned.signal() } }
        return state.withLock { s -> Reply in
            if s.bareReplies, [.status, .devices, .controls, .takes, .snapshot].contains(request.cmd) { return .success() }
            switch request.cmd {
            case .start:
                guard s.state == .idle else {
                    return .failure(.wrongState("cannot start: already \(s.state.rawValue) (run 'reelctl stop' first)"))
                }
                s.state = .recording
                s.file = "/srv/reel/\(request.name ?? "rec")" + ".mp4.part"
                s.segments = [SegmentInfo(index: 0, durationNs: 0)]
                return .success(file: s.file)
            case .pause:
                guard s.state == .recording else {
                    return .failure(.wrongState(
                        "cannot pause: not recording (state is \(s.state.rawValue); run 'reelctl start' first)"))
                }
                s.state = .paused
                s.segments[s.segments.count - 1].durationNs = 2_000_000_000
                return .success(status: status(s))
            case .resume:
                guard s.state == .paused else {
                    return .failure(.wrongState("cannot resume: not paused (state is \(s.state.rawValue))"))
                }
                s.state = .recording
                s.segments.append(SegmentInfo(index: s.segments.count, durationNs: 0))
                return .success(status: status(s))
            case .stop:
                guard s.state == .recording || s.state == .paused else {
                    return .failure(.wrongState("cannot stop: not recording (state is \(s.state.rawValue))"))
                }
                if s.segments[s.segments.count - 1].durationNs == 0 {
                    s.segments[s.segments.count - 1].durationNs = 1_234_567_890
                }
                let final = String(s.file!.dropLast(".part".count))
                let snapshot = status(s)
                s.state = .idle
                s.lastFile = final
                s.file = nil
                s.segments = []
                return .success(file: final, status: snapshot)
            case .undo:
                guard s.state == .recording || s.state == .paused, !s.segments.isEmpty else {
                    return .failure(.wrongState("cannot undo: no take left to remove"))
                }
                s.state = .paused
                s.segments.removeLast()
                return .success(status: status(s))
            case .status:
                return .success(status: status(s))
            case .devices:
                var r = Reply.success()
                r.devices = DeviceList(video: [], audio: [])
                return r
            case .snapshot where s.snapshotBytes != nil:
                var r = Reply.success()
                r.snapshot = SnapshotInfo(width: 16, height: 16, capturedNs: 1, jpeg: [UInt8](repeating: 0xFF, count: s.snapshotBytes!))
                return r
            case .controls, .set, .snapshot:
                return .failure(.failed("the test source has no controls; controls need a V4L2 camera"))
            case .events, .preview, .levels:
                return .failure(.failed("events reached the handler"))
            case .takes:
                var r = Reply.success()
                r.takes = []
                return r
            }
        }
    }
}

// MARK: - Log capture, to wait for server events instead of sleeping

final class LogSink: Sendable {
    private struct State {
        var messages: [String] = []
        var waiters: [(match: @Sendable (String) -> Bool, done: DispatchSemaphore)] = []
    }

    private let state = Mutex(State())

    func record(_ message: String) {
        state.withLock { s in
            s.messages.append(message)
            s.waiters.removeAll { waiter in
                guard waiter.match(message) else { return false }
                waiter.done.signal()
                return true
            }
        }
    }

    var messages: [String] { state.withLock { $0.messages } }

    /// Waits until a message containing `text` has been logged (or was already).
    func waitFor(_ text: String, timeout: TimeInterval = 10) -> Bool {
        let done = DispatchSemaphore(value: 0)
        let already = state.withLock { s -> Bool in
            if s.messages.contains(where: { $0.contains(text) }) { return true }
            s.waiters.append((match: { $0.contains(text) }, done: done))
            return false
        }
        return already || done.wait(timeout: .now() + timeout) == .success
    }

    func logger() -> Logger {
        var logger = Logger(label: "reel.control.test") { _ in CapturingLogHandler(sink: self) }
        logger.logLevel = .debug
        return logger
    }
}

struct CapturingLogHandler: LogHandler {
    let sink: LogSink
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var text = "\(event.message)"
        if let meta = event.metadata, !meta.isEmpty {
            text += " " + meta.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
        sink.record(text)
    }
}

// MARK: - A raw client that can misbehave

/// A blocking client socket that writes arbitrary bytes and reads lines, for malformed input.
final class RawConnection {
    let fd: Int32

    init(path: String) throws {
        fd = try Sys.socketUnix(nonblocking: false)
        guard let addr = Sys.address(path) else { throw SocketError.pathTooLong(path, kind: .cannotConnect) }
        try Sys.connect(fd, addr)
        // Reads time out instead of hanging a broken test forever.
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        // Unsafe: passes a pointer to the local timeval and its exact size for the call only.
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close() }

    private var closed = false

    func close() {
        if !closed { Glibc.close(fd); closed = true }
    }

    /// Writes everything, blocking; returns false if the server closed (EPIPE/ECONNRESET).
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool { Self.write(fd, bytes) }

    /// As `write`, for use from another thread with just the descriptor.
    static func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            // Unsafe: the array's storage is valid during the call and offset < count.
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }

    func write(_ text: String) { write(Array(text.utf8)) }

    private var buffer: [UInt8] = []

    /// The next line without its newline, or nil at end of stream (or after the 10 s timeout).
    func readLine() -> String? {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                return line
            }
            // Unsafe: recv writes at most chunk.count bytes into the array's own storage.
            let n = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { return nil }
            buffer.append(contentsOf: chunk[..<n])
        }
    }

    func readReply() throws -> Reply {
        guard let line = readLine() else { throw SocketError(.connectionClosed, path: "", "no reply line") }
        return try JSONDecoder().decode(Reply.self, from: Data(line.utf8))
    }

    /// True when the server has closed the connection (end of stream with no more lines).
    func atEndOfStream() -> Bool { readLine() == nil }

    /// True when the server closed the connection within the 10 s read timeout with nothing
    /// more to read; false if it sent a byte or the timeout passed (unlike `atEndOfStream`).
    func closedByServer() -> Bool {
        var byte: UInt8 = 0
        while true {
            // Unsafe: recv writes at most one byte into the local variable.
            let n = Glibc.recv(fd, &byte, 1, 0)
            if n < 0, errno == EINTR { continue }
            return n == 0 && buffer.isEmpty
        }
    }
}

// MARK: - Server fixture

/// A server on a fresh temp path with a fake recorder and captured logs.
final class Fixture {
    let dir = TempDir()
    let recorder = FakeRecorder()
    let logs = LogSink()
    let server: ControlServer
    var path: String { dir.socket() }

    init(maxClients: Int = ControlServer.defaultMaxClients, limits: ControlLimits? = nil, authorize: PeerAuthorizer? = nil,
         events: EventBus? = nil, live: LiveFeed? = nil) throws {
        server = try ControlServer(path: dir.socket(), handler: recorder, logger: logs.logger(),
                                   limits: limits ?? ControlLimits(maxClients: maxClients), authorize: authorize)
        if let events { server.attach(events: events) }
        if let live { server.attach(live: live) }
        server.start()
    }

    func client() throws -> ControlClient { try ControlClient(path: path) }

    deinit { server.shutdown() }
}
