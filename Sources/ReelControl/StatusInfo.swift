import ReelCore

// What `status` reports (`StatusInfo`, with its segments and takes and the recorder's state), as
// it goes over the wire. See docs/PROTOCOL.md.

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
}

/// The recorder's state as seen over the control socket.
public enum RecorderState: String, Codable, Sendable, CaseIterable {
    case idle, recording, paused, stopping
}

/// The `status` object of a reply. Each field is declared once, here: `Codable` is synthesized, so
/// the wire has the keys in declaration order, and `Wire` writes every nil as an explicit `null`
/// (`JSONWriterEncoder`). A new field is one line here (optional, or `@AddedLater` with an initial
/// value, so that replies from an older reeld still decode) plus where reeld sets it.
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
    @AddedLater public var audioFilledSamples: Int64 = 0
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
    @AddedLater public var audioPeakDbfs: [Double?] = []
    /// Size of the file being recorded so far, nil when idle.
    public var bytesWritten: Int64?
    /// Free space for reeld in the output directory (statvfs), nil when it cannot be read.
    public var freeBytes: Int64?
    /// The takes of the recording (in a `stop` reply: of the one finished), in output order.
    @AddedLater public var takes: [TakeInfo] = []
    /// With a length cap: output time left before it (0 once reached); nil without a cap.
    public var remainingNs: Nanos?
    /// Standby (warm devices): nil when off, else "opening", "warm" or "failed" (`lastError` says why).
    public var standby: String?
    /// The capture instant of the file's time 0 (CLOCK_MONOTONIC ns on reeld's host): its first
    /// frame's; without video, the instant its audio is cut from (with standby the start request's,
    /// else when the devices started). nil while idle or until that frame comes.
    public var originNs: Nanos?
    /// With `pre_roll`: the pre-roll a `start` now would get (ns; 0 unless idle and warm); nil without one.
    public var preRollNs: Nanos?

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
}

/// A non-optional field added after the first release: a reply from an older reeld lacks it (or has
/// `null`), which decodes as `Value.whenAbsent` (0, []) instead of failing. Encodes as its value.
@propertyWrapper
public struct AddedLater<Value: Codable & AbsentDecodable>: Codable {
    public var wrappedValue: Value

    public init(wrappedValue: Value) { self.wrappedValue = wrappedValue }
    public init(from decoder: any Decoder) throws { wrappedValue = try Value(from: decoder) }
    public func encode(to encoder: any Encoder) throws { try wrappedValue.encode(to: encoder) }
}

extension AddedLater: Equatable where Value: Equatable {}
extension AddedLater: Sendable where Value: Sendable {}

/// What an `@AddedLater` field decodes as when the reply lacks it.
public protocol AbsentDecodable { static var whenAbsent: Self { get } }
extension Int64: AbsentDecodable { public static var whenAbsent: Int64 { 0 } }
extension Array: AbsentDecodable { public static var whenAbsent: Array { [] } }

extension KeyedDecodingContainer {
    /// Chosen over the general `decode` by synthesized `init(from:)` for an `@AddedLater` field.
    public func decode<Value>(_ type: AddedLater<Value>.Type, forKey key: Key) throws -> AddedLater<Value> {
        AddedLater(wrappedValue: try decodeIfPresent(Value.self, forKey: key) ?? Value.whenAbsent)
    }
}
