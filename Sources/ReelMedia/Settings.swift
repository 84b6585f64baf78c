/// x264 settings. Defaults: veryfast, CRF 23, a keyframe every 2 s, High profile, yuv420p.
public struct H264Settings: Sendable, Hashable {
    public var preset = "veryfast"
    public var tune: String? = nil
    /// Constant rate factor (0...51). Ignored when `bitrateKbps` is set.
    public var crf: Int? = 23
    /// Average bitrate; when set, x264 runs ABR instead of CRF.
    public var bitrateKbps: Int? = nil
    public var keyintSeconds = 2
    public var profile = "high"
    /// x264 threads; 0 = x264 decides.
    public var threads = 0
    public init() {}
}

/// AAC-LC settings.
public struct AACSettings: Sendable, Hashable {
    /// Bits per second.
    public var bitrate = 128_000
    public init() {}
}
