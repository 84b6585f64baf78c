import ReelCore

/// What the control plane can see of a running recording; published by the pipeline thread.
public struct SessionSnapshot: Sendable {
    public var phase: Timeline.Phase = .recording
    public var stopping = false
    public var segmentDurations: [Nanos] = []
    public var recordedNs: Nanos = 0
    public var frames: Int64 = 0
    public var droppedFrames: Int64 = 0
    public var audioSamples: Int64 = 0
    public var audioFilledSamples: Int64 = 0
    public var timestampFixes: Int = 0
    /// Per channel: the largest |sample| of the audio encoded (kept) over the last ~1 s, 0...32768.
    public var audioPeak: [Int32] = []
    /// Bytes of the MP4 written so far.
    public var bytesWritten: Int64 = 0
    /// The kept takes so far (the open one with no duration).
    public var takes: [Timeline.Take] = []
    /// Output time left before the length cap (nil: no cap); true once the cap stopped the recording.
    public var remaining: Nanos?
    public var capReached = false
    /// The capture instant (CLOCK_MONOTONIC ns) of the file's time 0 (`SessionMachine.Progress.origin`).
    public var origin: Nanos?

    public init() {}
}
