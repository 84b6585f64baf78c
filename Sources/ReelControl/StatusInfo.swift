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
