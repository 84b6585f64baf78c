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
    /// Turns the connection into a stream of JPEG frames of the live camera (`width`, `fps`;
    /// handled by the server itself, from `LiveFeed`).
    case preview
    /// Turns the connection into a stream of audio levels (peak and RMS per channel every 50 ms).
    case levels
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
    /// Only meaningful for `start`: this recording's pre-roll in ns (at most the `pre_roll`
    /// setting; nil: that setting's). It begins this long before the request reached reeld.
    public var preRollNs: Nanos?
    /// Only meaningful for `start`: the instant its user asked (CLOCK_MONOTONIC ns on reeld's host,
    /// e.g. a button's input event). With standby the recording (and its pre-roll) counts from
    /// there, not from the request's arrival, if it lies at most `PreRoll.askedWindow` (250 ms)
    /// before it (an older one counts as that far back, a later one as the arrival).
    public var atNs: Nanos?
    /// Only meaningful for `snapshot` and `preview`: scale the image to this many columns (nil:
    /// as captured for a snapshot, 640 for a preview).
    public var width: Int?
    /// Only meaningful for `preview`: frames a second (nil: 10).
    public var fps: Int?
    /// Only meaningful for `undo`: the take it must remove (refused if the last take is another).
    public var take: Int?
    /// Only meaningful for `set` (instead of `args`): clear earlier `set`s.
    public var reset: ControlReset?
    /// How long the client waits for the reply (ms): a pause, resume or undo the pipeline has not
    /// taken by then is cancelled, never applied (nil: reeld's own 10 s).
    public var timeoutMs: Int?

    public init(v: Int = protocolVersion, id: Int? = nil, cmd: Command, name: String? = nil, args: [String: CameraControlInput]? = nil,
                label: String? = nil, maxDurationNs: Nanos? = nil, width: Int? = nil, take: Int? = nil, reset: ControlReset? = nil, timeoutMs: Int? = nil,
                fps: Int? = nil, preRollNs: Nanos? = nil, atNs: Nanos? = nil) {
        self.preRollNs = preRollNs
        self.atNs = atNs
        self.width = width
        self.fps = fps
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
    /// `events`, `preview`, `levels`: true once the connection has become a stream.
    public var subscribed: Bool?
    /// `controls`: every control of the camera; `set`: the controls set, as read back.
    public var controls: [CameraControlInfo]?
    /// `takes` only: the takes, as in the status object.
    public var takes: [TakeInfo]?
    /// `start` only: the start instant (CLOCK_MONOTONIC ns on reeld's host): nothing captured before it is recorded.
    public var startNs: Nanos?
    /// `start` only, with standby: the pre-roll it got (ns): `startNs` lies this long before the
    /// request reached reeld (less than asked when the devices opened, or the last recording
    /// ended, more recently than that).
    public var preRollNs: Nanos?
    /// `snapshot` only: the JPEG and what it shows.
    public var snapshot: SnapshotInfo?
    /// `preview` only: the size and rate of the frames that follow.
    public var preview: PreviewInfo?

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

/// A `preview` reply's grant: the frames' size (height 0 until a camera is open) and rate.
public struct PreviewInfo: Codable, Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var fps: Int
    public init(width: Int, height: Int, fps: Int) {
        self.width = width; self.height = height; self.fps = fps
    }
}

/// One line of a `preview` or `levels` stream, as a client reads it: `event` says which
/// (`preview`, `preview_state`, `levels`); the other fields are those of its kind.
public struct LiveLine: Codable, Sendable, Equatable {
    public enum Kind {
        public static let preview = "preview"
        public static let previewState = "preview_state"
        public static let levels = "levels"
    }
    public var v: Int
    public var event: String
    // preview
    public var seq: Int64?
    public var width: Int?
    public var height: Int?
    public var dropped: Int?
    public var bytes: Int?
    public var jpeg: String?
    // preview_state
    public var live: Bool?
    public var reason: String?
    // levels
    public var peakDbfs: [Double]?
    public var rmsDbfs: [Double]?
    /// `preview` and `levels`: when the frame (the window's first sample) was captured, CLOCK_MONOTONIC ns.
    public var capturedNs: Nanos?
    /// When reeld published it, CLOCK_MONOTONIC ns.
    public var at: Nanos

    /// A `preview` line's JPEG bytes (nil: none or not base64).
    public var jpegBytes: [UInt8]? { jpeg.flatMap { Data(base64Encoded: $0) }.map { [UInt8]($0) } }
}
