import Foundation
import ReelCore

/// The version every request and reply carries as `"v"`. See docs/PROTOCOL.md.
public let protocolVersion = 1

/// What a client asks the daemon to do.
public enum Command: String, Codable, Sendable, CaseIterable {
    case start, pause, resume, stop, status, devices
    /// Lists the camera's controls; `set` changes some (`args`), while idle or recording.
    case controls, set
    /// Turns the connection into a stream of `ControlEvent` lines (handled by the server itself).
    case events
    /// Lists the takes of the recording (none while idle).
    case takes
    /// Removes the last take (while recording: ends it first, leaving the recording paused).
    case undo
    /// A JPEG of the latest captured frame (`width`: scaled to it), in the reply.
    case snapshot
}

/// `set`'s `reset`: clear what earlier `set`s changed, all of it (`true`) or the named controls.
public enum ControlReset: Codable, Sendable, Equatable {
    case all
    case only([String])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let all = try? c.decode(Bool.self), all { self = .all; return }
        self = .only(try c.decode([String].self))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .all: try c.encode(true)
        case let .only(names): try c.encode(names)
        }
    }
}

/// One request line: `{"v":1,"id":7,"cmd":"start","name":"clip"}`.
public struct Request: Codable, Sendable, Equatable {
    public var v: Int
    /// Chosen by the client, echoed back in the reply; optional.
    public var id: Int?
    public var cmd: Command
    /// Only meaningful for `start`: the base name of the file to record.
    public var name: String?
    /// Only meaningful for `set`: control name -> value (`{"brightness": 200, "white_balance_automatic": false}`).
    public var args: [String: CameraControlInput]?
    /// Only meaningful for `start` and `resume`: the label of the take it begins (its chapter title).
    public var label: String?
    /// Only meaningful for `start`: the length cap of this recording in ns (0: none), overriding
    /// the `max_duration` setting.
    public var maxDurationNs: Nanos?
    /// Only meaningful for `snapshot`: scale the image to this many columns (nil: as captured).
    public var width: Int?
    /// Only meaningful for `undo`: the take it must remove (refused if the last take is another).
    public var take: Int?
    /// Only meaningful for `set` (instead of `args`): clear earlier `set`s.
    public var reset: ControlReset?
    /// How long the client waits for the reply (ms): a pause, resume or undo the pipeline has not
    /// taken by then is cancelled, never applied (nil: reeld's own 10 s).
    public var timeoutMs: Int?

    public init(v: Int = protocolVersion, id: Int? = nil, cmd: Command, name: String? = nil, args: [String: CameraControlInput]? = nil,
                label: String? = nil, maxDurationNs: Nanos? = nil, width: Int? = nil, take: Int? = nil, reset: ControlReset? = nil, timeoutMs: Int? = nil) {
        self.width = width
        self.timeoutMs = timeoutMs
        self.take = take
        self.reset = reset
        self.v = v
        self.id = id
        self.cmd = cmd
        self.name = name
        self.args = args
        self.label = label
        self.maxDurationNs = maxDurationNs
    }
}

/// An error as carried in a reply: a machine-readable `code` and a message for people that
/// names the thing and the fix.
public struct ControlError: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    /// The codes of protocol version 1. Clients must treat an unknown code like `failed`.
    public enum Code {
        /// Malformed JSON, unknown command, wrong version, bad field, line too long.
        public static let badRequest = "bad_request"
        /// The command is not valid in the recorder's current state.
        public static let wrongState = "wrong_state"
        /// An I/O or device failure while carrying out the command.
        public static let failed = "failed"
        /// The server is serving its maximum number of clients.
        public static let busy = "busy"
        /// The client's user may not use the control socket (SO_PEERCRED check).
        public static let forbidden = "forbidden"
    }

    public var code: String
    public var message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    public static func badRequest(_ message: String) -> ControlError { .init(code: Code.badRequest, message: message) }
    public static func wrongState(_ message: String) -> ControlError { .init(code: Code.wrongState, message: message) }
    public static func failed(_ message: String) -> ControlError { .init(code: Code.failed, message: message) }
    public static func busy(_ message: String) -> ControlError { .init(code: Code.busy, message: message) }
    public static func forbidden(_ message: String) -> ControlError { .init(code: Code.forbidden, message: message) }

    public var description: String { message }
}

/// One recorded segment (the stretch between a start or resume and the next pause or stop).
public struct SegmentInfo: Codable, Sendable, Equatable {
    public var index: Int
    public var durationNs: Nanos

    public init(index: Int, durationNs: Nanos) {
        self.index = index
        self.durationNs = durationNs
    }
}

/// One take (a kept span, numbered by its place in the output; its chapter in the finished file).
public struct TakeInfo: Codable, Sendable, Equatable {
    public var number: Int
    /// Given by the start or resume that began it, or nil.
    public var label: String?
    /// The chapter title: the label, or "Take N".
    public var title: String
    /// Where it starts in the output, ns.
    public var startNs: Nanos
    /// Its length in the output, ns; nil while it is open.
    public var durationNs: Nanos?

    public init(number: Int, label: String?, title: String, startNs: Nanos, durationNs: Nanos?) {
        self.number = number
        self.label = label
        self.title = title
        self.startNs = startNs
        self.durationNs = durationNs
    }

    public init(_ t: Timeline.Take) {
        self.init(number: t.number, label: t.label, title: t.title, startNs: t.outputStart, durationNs: t.duration)
    }

    private enum CodingKeys: String, CodingKey { case number, label, title, startNs, durationNs }

    // Written by hand so that absent values appear as `null`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(number, forKey: .number)
        try c.encode(label, forKey: .label)
        try c.encode(title, forKey: .title)
        try c.encode(startNs, forKey: .startNs)
        try c.encode(durationNs, forKey: .durationNs)
    }
}

/// The recorder's state as seen over the control socket.
public enum RecorderState: String, Codable, Sendable, CaseIterable {
    case idle, recording, paused, stopping
}

/// The `status` object of a reply. Optional fields are encoded as explicit `null`.
public struct StatusInfo: Codable, Sendable, Equatable {
    public var state: RecorderState
    /// The `.part` file being recorded, or nil when idle.
    public var file: String?
    public var segments: [SegmentInfo]
    /// Sum of the segments' durations.
    public var recordedNs: Nanos
    /// Video frames written to the current file.
    public var frames: Int64
    /// Video frames dropped (late, or the encoder could not keep up) in the current file.
    public var droppedFrames: Int64
    /// Audio samples (per channel) written to the current file.
    public var audioSamples: Int64
    /// Of those, samples the audio source lost (overrun, suspend, pipeline behind) that were
    /// filled with silence to keep sync.
    public var audioFilledSamples: Int64
    /// The last completed file, or nil.
    public var lastFile: String?
    /// The last error the recorder hit, or nil.
    public var lastError: String?
    /// Short description of the video source, e.g. "test 640x360 30/1 yuyv".
    public var video: String
    /// Short description of the audio source, e.g. "test 48000 Hz 1 ch".
    public var audio: String
    /// Time since the daemon started.
    public var uptimeNs: Nanos
    /// Per audio channel: the peak of the recorded audio over the last second in dBFS (0 is full
    /// scale, one decimal), nil for digital silence. Empty when idle or without audio.
    public var audioPeakDbfs: [Double?] = []
    /// Size of the file being recorded so far, nil when idle.
    public var bytesWritten: Int64?
    /// Free space for reeld in the output directory (statvfs), nil when it cannot be read.
    public var freeBytes: Int64?
    /// The takes of the recording (in a `stop` reply: of the one finished), in output order.
    public var takes: [TakeInfo] = []
    /// With a length cap: output time left before it (0 once reached); nil without a cap.
    public var remainingNs: Nanos?
    /// Standby (warm devices): nil when off, else "opening", "warm" or "failed" (`lastError` says why).
    public var standby: String?
    /// The capture instant of the file's time 0 (CLOCK_MONOTONIC ns on reeld's host): its first
    /// frame's; without video, the instant its audio is cut from (with standby the start request's,
    /// else when the devices started). nil while idle or until that frame comes.
    public var originNs: Nanos?

    public init(state: RecorderState, file: String?, segments: [SegmentInfo], recordedNs: Nanos,
                frames: Int64, droppedFrames: Int64, audioSamples: Int64, lastFile: String?,
                lastError: String?, video: String, audio: String, uptimeNs: Nanos, audioFilledSamples: Int64 = 0) {
        self.audioFilledSamples = audioFilledSamples
        self.state = state
        self.file = file
        self.segments = segments
        self.recordedNs = recordedNs
        self.frames = frames
        self.droppedFrames = droppedFrames
        self.audioSamples = audioSamples
        self.lastFile = lastFile
        self.lastError = lastError
        self.video = video
        self.audio = audio
        self.uptimeNs = uptimeNs
    }

    private enum CodingKeys: String, CodingKey {
        case state, file, segments, recordedNs, frames, droppedFrames, audioSamples, audioFilledSamples, lastFile, lastError, video, audio, uptimeNs
        case audioPeakDbfs, bytesWritten, freeBytes, takes, remainingNs, standby, originNs
    }

    // Written by hand so that a reply from an older reeld without `audioFilledSamples` decodes (as 0).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        state = try c.decode(RecorderState.self, forKey: .state)
        file = try c.decodeIfPresent(String.self, forKey: .file)
        segments = try c.decode([SegmentInfo].self, forKey: .segments)
        recordedNs = try c.decode(Nanos.self, forKey: .recordedNs)
        frames = try c.decode(Int64.self, forKey: .frames)
        droppedFrames = try c.decode(Int64.self, forKey: .droppedFrames)
        audioSamples = try c.decode(Int64.self, forKey: .audioSamples)
        audioFilledSamples = try c.decodeIfPresent(Int64.self, forKey: .audioFilledSamples) ?? 0
        lastFile = try c.decodeIfPresent(String.self, forKey: .lastFile)
        lastError = try c.decodeIfPresent(String.self, forKey: .lastError)
        video = try c.decode(String.self, forKey: .video)
        audio = try c.decode(String.self, forKey: .audio)
        uptimeNs = try c.decode(Nanos.self, forKey: .uptimeNs)
        // Added later (live view): absent from older replies.
        audioPeakDbfs = try c.decodeIfPresent([Double?].self, forKey: .audioPeakDbfs) ?? []
        bytesWritten = try c.decodeIfPresent(Int64.self, forKey: .bytesWritten)
        freeBytes = try c.decodeIfPresent(Int64.self, forKey: .freeBytes)
        // Added with labels and the length cap.
        takes = try c.decodeIfPresent([TakeInfo].self, forKey: .takes) ?? []
        remainingNs = try c.decodeIfPresent(Nanos.self, forKey: .remainingNs)
        standby = try c.decodeIfPresent(String.self, forKey: .standby)  // added with standby
        originNs = try c.decodeIfPresent(Nanos.self, forKey: .originNs)
    }

    // Written by hand so that absent values appear as `null` (the synthesized one omits them).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(state, forKey: .state)
        try c.encode(file, forKey: .file)
        try c.encode(segments, forKey: .segments)
        try c.encode(recordedNs, forKey: .recordedNs)
        try c.encode(frames, forKey: .frames)
        try c.encode(droppedFrames, forKey: .droppedFrames)
        try c.encode(audioSamples, forKey: .audioSamples)
        try c.encode(audioFilledSamples, forKey: .audioFilledSamples)
        try c.encode(lastFile, forKey: .lastFile)
        try c.encode(lastError, forKey: .lastError)
        try c.encode(video, forKey: .video)
        try c.encode(audio, forKey: .audio)
        try c.encode(uptimeNs, forKey: .uptimeNs)
        try c.encode(audioPeakDbfs, forKey: .audioPeakDbfs)
        try c.encode(bytesWritten, forKey: .bytesWritten)
        try c.encode(freeBytes, forKey: .freeBytes)
        try c.encode(takes, forKey: .takes)
        try c.encode(remainingNs, forKey: .remainingNs)
        try c.encode(standby, forKey: .standby)
        try c.encode(originNs, forKey: .originNs)
    }
}

/// One line of an event stream (`events`): a state change, a new segment, a finished file,
/// an error, or `overflow` (the subscriber fell behind and is dropped; the last line it gets).
public struct ControlEvent: Codable, Sendable, Equatable {
    public enum Kind {
        public static let state = "state"
        public static let segment = "segment"
        public static let finished = "finished"
        public static let error = "error"
        public static let overflow = "overflow"
        /// A take closed (pause, stop, the cap): it is kept in the file.
        public static let takeKept = "take_kept"
        /// The length cap stopped the recording.
        public static let capReached = "cap_reached"
        /// `undo` removed a take (number and label): it is no longer in the file.
        public static let takeUndone = "take_undone"
    }
    public var v: Int
    /// `state`, `segment`, `finished`, `error` or `overflow`; clients ignore kinds they do not know.
    public var event: String
    /// `state` events: the new state.
    public var state: RecorderState?
    /// The file concerned: the `.part` path while recording, the final path for `finished`.
    public var file: String?
    /// `segment` events: the index of the segment that begins.
    public var segment: Int?
    /// `error` events: what went wrong, naming the thing and the fix.
    public var message: String?
    /// `take_kept` events: the take that closed (number, label, title, start and duration).
    public var take: Int?
    public var label: String?
    public var title: String?
    public var startNs: Nanos?
    public var durationNs: Nanos?
    /// `cap_reached` events: the cap, ns.
    public var maxDurationNs: Nanos?
    /// When it happened, CLOCK_MONOTONIC nanoseconds on reeld's host.
    public var at: Nanos

    public init(event: String, state: RecorderState? = nil, file: String? = nil, segment: Int? = nil,
                message: String? = nil, take: TakeInfo? = nil, maxDurationNs: Nanos? = nil, at: Nanos) {
        self.take = take?.number
        self.label = take?.label
        self.title = take?.title
        self.startNs = take?.startNs
        self.durationNs = take?.durationNs
        self.maxDurationNs = maxDurationNs
        self.v = protocolVersion
        self.event = event
        self.state = state
        self.file = file
        self.segment = segment
        self.message = message
        self.at = at
    }
}

/// One reply line. `file` is set by `start` (the `.part` path) and `stop` (the final path);
/// `status` by `status`, `pause`, `resume` and `stop`; `devices` by `devices`; `error` when `ok` is false.
public struct Reply: Codable, Sendable, Equatable {
    public var v: Int
    public var id: Int?
    public var ok: Bool
    public var file: String?
    public var status: StatusInfo?
    public var error: ControlError?
    /// The capture devices present (`devices` only).
    public var devices: DeviceList?
    /// `events` only: true once the connection has become an event stream.
    public var subscribed: Bool?
    /// `controls`: every control of the camera; `set`: the controls set, as read back.
    public var controls: [CameraControlInfo]?
    /// `takes` only: the takes, as in the status object.
    public var takes: [TakeInfo]?
    /// `start` only: the start instant (CLOCK_MONOTONIC ns on reeld's host): nothing captured before it is recorded.
    public var startNs: Nanos?
    /// `snapshot` only: the JPEG and what it shows.
    public var snapshot: SnapshotInfo?

    public init(v: Int = protocolVersion, id: Int? = nil, ok: Bool, file: String? = nil,
                status: StatusInfo? = nil, error: ControlError? = nil, devices: DeviceList? = nil,
                subscribed: Bool? = nil) {
        self.devices = devices
        self.subscribed = subscribed
        self.v = v
        self.id = id
        self.ok = ok
        self.file = file
        self.status = status
        self.error = error
    }

    /// The server overwrites `v` and `id` (echoing the request's), so handlers need not set them.
    public static func success(id: Int? = nil, file: String? = nil, status: StatusInfo? = nil) -> Reply {
        Reply(id: id, ok: true, file: file, status: status)
    }

    public static func failure(_ error: ControlError, id: Int? = nil) -> Reply {
        Reply(id: id, ok: false, error: error)
    }
}

// MARK: - Wire encoding

/// Encoding and parsing of protocol lines, shared by server, client and tests.
public enum Wire {
    /// Longest accepted request line in bytes, not counting its `\n`.
    public static let maxLineBytes = 64 * 1024

    /// `value` as one line of compact JSON terminated by `\n`. The protocol's own types are
    /// written with their keys in the documented order; anything else with sorted keys.
    public static func line(_ value: some Encodable) throws -> [UInt8] {
        var bytes: [UInt8]
        if let ordered = value as? any OrderedJSON {
            var writer = JSONWriter()
            ordered.write(to: &writer)
            bytes = writer.bytes
        } else {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
            bytes = [UInt8](try encoder.encode(value))
        }
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// `value` as compact JSON text without a newline (for printing).
    public static func text(_ value: some Encodable) throws -> String {
        var bytes = try line(value)
        bytes.removeLast()
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Parses one request line (without its `\n`). On failure gives the `bad_request` error and
    /// whatever `id` could be read from the line, so the error reply can still echo it.
    public static func parseRequest(_ line: some Collection<UInt8>) -> Result<Request, RequestParseError> {
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: Data(line))
        } catch {
            return .failure(.init(id: nil, error: .badRequest(
                "malformed request: not a JSON object on one line (send e.g. {\"v\":1,\"cmd\":\"status\"})")))
        }
        let id = envelope.id
        func bad(_ message: String) -> Result<Request, RequestParseError> {
            .failure(.init(id: id, error: .badRequest(message)))
        }
        guard envelope.idValid else {
            return bad("bad \"id\": must be an integer (or left out)")
        }
        guard let v = envelope.v else {
            return bad("missing \"v\": add \"v\":\(protocolVersion) to the request")
        }
        guard v == protocolVersion else {
            return bad("unsupported protocol version \(v): this reeld speaks \"v\":\(protocolVersion)")
        }
        let known = Command.allCases.map(\.rawValue).joined(separator: ", ")
        guard let cmdText = envelope.cmd else {
            return bad("missing \"cmd\": must be one of \(known)")
        }
        guard let cmd = Command(rawValue: cmdText) else {
            return bad("unknown command \"\(cmdText)\": must be one of \(known)")
        }
        if !envelope.nameValid {
            return bad("bad \"name\": must be a string (or left out)")
        }
        if let name = envelope.name, cmd == .start, let problem = nameProblem(name) {
            return bad(problem)
        }
        if !envelope.argsValid {
            return bad("bad \"args\": must be an object of control names and values, each an integer, true/false or a string (e.g. {\"brightness\":200})")
        }
        if !envelope.labelValid {
            return bad("bad \"label\": must be a string (or left out)")
        }
        if let label = envelope.label, cmd == .start || cmd == .resume, let problem = labelProblem(label) {
            return bad(problem)
        }
        if cmd == .start, let problem = envelope.maxDurationProblem {
            return bad(problem)
        }
        if !envelope.widthValid || (cmd == .snapshot && (envelope.width ?? 16) < 16) {
            return bad("bad \"width\": must be an integer of at least 16 (pixels; or left out for the captured size)")
        }
        if !envelope.takeValid { return bad("bad \"take\": must be an integer (or left out)") }
        if !envelope.timeoutValid || !(1...Self.maxTimeoutMs).contains(envelope.timeoutMs ?? 1) {
            return bad("bad \"timeoutMs\": must be an integer from 1 to \(Self.maxTimeoutMs) (ms the client waits for the reply; or left out)")
        }
        if cmd == .undo, let take = envelope.take, let problem = takeProblem(take) { return bad(problem) }
        if !envelope.resetValid {
            return bad("bad \"reset\": must be true (every control 'set' changed) or a non-empty list of control names, e.g. [\"brightness\"]")
        }
        if cmd == .set, envelope.reset != nil, !(envelope.args?.isEmpty ?? true) {
            return bad("'set' takes \"args\" or \"reset\", not both (reset first, then set)")
        }
        if cmd == .set, envelope.reset == nil, envelope.args?.isEmpty ?? true {
            return bad("'set' needs \"args\": the controls to set, e.g. {\"brightness\":200} (see 'reelctl controls'), or \"reset\": true to clear earlier sets")
        }
        return .success(Request(v: v, id: id, cmd: cmd, name: cmd == .start ? envelope.name : nil, args: cmd == .set ? envelope.args : nil,
                                label: cmd == .start || cmd == .resume ? envelope.label : nil,
                                maxDurationNs: cmd == .start ? envelope.maxDurationNs : nil,
                                width: cmd == .snapshot ? envelope.width : nil, take: cmd == .undo ? envelope.take : nil,
                                reset: cmd == .set ? envelope.reset : nil, timeoutMs: envelope.timeoutMs))
    }

    /// The longest label, in UTF-8 bytes.
    public static let maxLabelBytes = 255
    /// The longest length cap, ns (a week; also `max_duration`'s range).
    public static let maxDurationLimitNs: Nanos = Int64(LengthCap.maxSeconds) * nanosPerSecond

    /// Why `label` cannot name a take, or nil if it can.
    public static func labelProblem(_ label: String) -> String? {
        let hint = "use a short title such as 'intro'"
        if label.isEmpty { return "bad \"label\": empty (\(hint), or leave it out: the take is then called 'Take N')" }
        if label.utf8.count > maxLabelBytes { return "bad \"label\": \(label.utf8.count) bytes, longer than \(maxLabelBytes) (\(hint))" }
        if label.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) }) {
            return "bad \"label\": contains control characters (\(hint), on one line)"
        }
        for (i, u) in label.unicodeScalars.enumerated() where isInvisibleFormat(u) {
            let hex = String(u.value, radix: 16, uppercase: true)
            let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            let name = u.properties.name.map { " " + $0 } ?? ""
            return "bad \"label\": \(code)\(name) at character \(i + 1) is an invisible or direction-changing character: a chapter title could pretend to be another with it (\(hint), in plain text)"
        }
        return nil
    }

    /// Bidirectional embeddings, overrides, isolates and marks, zero-width and other invisible
    /// format characters: what makes a title display as something other than what it holds.
    static func isInvisibleFormat(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0x00AD, 0x034F, 0x061C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B...0x180F, 0x200B...0x200F, 0x202A...0x202E,
             0x2060...0x206F, 0x3164, 0xFEFF, 0xFFA0, 0xFFF9...0xFFFB:
            return true
        default: return false
        }
    }

    /// The longest `timeoutMs` (an hour).
    public static let maxTimeoutMs = 3_600_000

    /// Why `take` cannot name the take an `undo` expects to remove, or nil if it can.
    public static func takeProblem(_ take: Int) -> String? {
        take >= 1 ? nil : "bad \"take\": \(take) is not a take number (takes are numbered from 1; see 'reelctl takes')"
    }

    /// Why `ns` cannot be a length cap, or nil if it can (0: none).
    public static func maxDurationProblem(_ ns: Nanos) -> String? {
        if ns < 0 || ns > maxDurationLimitNs {
            return "bad \"maxDurationNs\": \(ns) is out of range 0 to \(maxDurationLimitNs) (ns; 0 means no cap)"
        }
        return nil
    }

    /// Why `name` cannot be a recording's base name, or nil if it can. The daemon may apply
    /// stricter rules of its own.
    public static func nameProblem(_ name: String) -> String? {
        let hint = "use a plain file name such as 'clip-1'"
        if name.isEmpty { return "bad \"name\": empty (\(hint), or leave it out)" }
        if name.utf8.count > 200 { return "bad \"name\": longer than 200 bytes (\(hint))" }
        if name.hasPrefix(".") { return "bad \"name\" \"\(name)\": must not start with '.' (\(hint))" }
        if name.contains("/") { return "bad \"name\" \"\(name)\": must not contain '/' (\(hint))" }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            return "bad \"name\": contains control characters (\(hint))"
        }
        return nil
    }

    /// A lenient view of a request, so that type errors in one field give a precise message.
    private struct Envelope: Decodable {
        var v: Int?
        var id: Int?
        var idValid = true
        var cmd: String?
        var name: String?
        var nameValid = true
        var args: [String: CameraControlInput]?
        var argsValid = true
        var label: String?
        var labelValid = true
        var maxDurationNs: Nanos?
        var maxDurationValid = true
        var width: Int?
        var widthValid = true
        var take: Int?
        var takeValid = true
        var reset: ControlReset?
        var resetValid = true
        var timeoutMs: Int?
        var timeoutValid = true

        var maxDurationProblem: String? {
            guard maxDurationValid else { return "bad \"maxDurationNs\": must be an integer number of nanoseconds (or left out)" }
            return maxDurationNs.flatMap(Wire.maxDurationProblem)
        }

        enum CodingKeys: String, CodingKey { case v, id, cmd, name, args, label, maxDurationNs, width, take, reset, timeoutMs }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            v = try? c.decodeIfPresent(Int.self, forKey: .v)
            if c.contains(.v), v == nil { v = -1 }  // present but not an integer: a wrong version
            if c.contains(.id), (try? c.decodeNil(forKey: .id)) != true {
                id = try? c.decode(Int.self, forKey: .id)
                idValid = id != nil
            }
            cmd = try? c.decodeIfPresent(String.self, forKey: .cmd)
            if c.contains(.cmd), cmd == nil, (try? c.decodeNil(forKey: .cmd)) != true { cmd = "(not a string)" }
            if c.contains(.name), (try? c.decodeNil(forKey: .name)) != true {
                name = try? c.decode(String.self, forKey: .name)
                nameValid = name != nil
            }
            if c.contains(.args), (try? c.decodeNil(forKey: .args)) != true {
                args = try? c.decode([String: CameraControlInput].self, forKey: .args)
                argsValid = args != nil
            }
            if c.contains(.label), (try? c.decodeNil(forKey: .label)) != true {
                label = try? c.decode(String.self, forKey: .label)
                labelValid = label != nil
            }
            if c.contains(.maxDurationNs), (try? c.decodeNil(forKey: .maxDurationNs)) != true {
                maxDurationNs = try? c.decode(Nanos.self, forKey: .maxDurationNs)
                maxDurationValid = maxDurationNs != nil
            }
            if c.contains(.width), (try? c.decodeNil(forKey: .width)) != true {
                width = try? c.decode(Int.self, forKey: .width)
                widthValid = width != nil
            }
            if c.contains(.take), (try? c.decodeNil(forKey: .take)) != true {
                take = try? c.decode(Int.self, forKey: .take)
                takeValid = take != nil
            }
            if c.contains(.timeoutMs), (try? c.decodeNil(forKey: .timeoutMs)) != true {
                timeoutMs = try? c.decode(Int.self, forKey: .timeoutMs)
                timeoutValid = timeoutMs != nil
            }
            if c.contains(.reset), (try? c.decodeNil(forKey: .reset)) != true {
                if let all = try? c.decode(Bool.self, forKey: .reset) {
                    reset = all ? .all : nil
                } else if let names = try? c.decode([String].self, forKey: .reset), !names.isEmpty,
                          names.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 64 }), names.count <= 256 {
                    reset = .only(names)
                } else { resetValid = false }
            }
        }
    }
}

/// A `snapshot` reply's image: a JPEG of one captured frame, base64 in `jpeg`.
public struct SnapshotInfo: Codable, Sendable, Equatable {
    public var width: Int
    public var height: Int
    /// When the frame was captured, CLOCK_MONOTONIC ns on reeld's host.
    public var capturedNs: Nanos
    /// The JPEG's size in bytes (at most `SnapshotInfo.maxBytes`).
    public var bytes: Int
    /// The JPEG, base64 (RFC 4648, with padding).
    public var jpeg: String

    /// The largest JPEG a reply carries (8 MiB: about 11 MB of base64, under the client's limit).
    public static let maxBytes = 8 << 20

    public init(width: Int, height: Int, capturedNs: Nanos, jpeg: [UInt8]) {
        self.width = width
        self.height = height
        self.capturedNs = capturedNs
        self.bytes = jpeg.count
        self.jpeg = Data(jpeg).base64EncodedString()
    }

    /// The JPEG's bytes (nil: not base64).
    public var jpegBytes: [UInt8]? { Data(base64Encoded: jpeg).map { [UInt8]($0) } }
}

/// A request line that could not be parsed: the `bad_request` error and the id, if readable.
public struct RequestParseError: Error, Sendable, Equatable {
    public var id: Int?
    public var error: ControlError
}
