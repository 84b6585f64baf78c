import ReelCore
import ReelStorage

/// reeld's settings, typed: one field per key of the setting table (`SettingKey.spec`), named as
/// its case, of the type the key's check reads its value into. A value is checked and parsed
/// once, as it is set (`DaemonSettings.resolve`); what is here passed its check, so nothing
/// looks a setting up by name or parses it again.
public struct Settings: Sendable, Equatable {
    // Control
    public internal(set) var socket: String
    /// nil for "" (none), as for every optional string here.
    public internal(set) var controlGroup: String?
    public internal(set) var controlUser: String?
    public internal(set) var logLevel: LogLevel
    // Storage
    public internal(set) var outputDir: String
    public internal(set) var minFreeMB: Int
    public internal(set) var fsync: FsyncPolicy
    public internal(set) var onFinish: [String]
    /// Seconds.
    public internal(set) var onFinishTimeout: Int
    /// The length cap in ns, nil for none (0).
    public internal(set) var maxDuration: Nanos?
    /// nil for "" (none).
    public internal(set) var outboxDir: String?
    /// MB; 0 for none.
    public internal(set) var keepFreeMB: Int
    // Sources
    public internal(set) var video: VideoSourceSetting
    public internal(set) var audio: AudioSourceSetting
    public internal(set) var size: VideoSize
    public internal(set) var fps: Rational
    public internal(set) var pixelFormat: CameraPixelFormat
    public internal(set) var sampleRate: Int
    public internal(set) var channels: Int
    public internal(set) var standby: Bool
    /// ns (0: none).
    public internal(set) var preRoll: Nanos
    public internal(set) var preRollMaxMB: Int
    public internal(set) var previewMaxWidth: Int
    public internal(set) var previewMaxFps: Int
    // Encoding
    public internal(set) var preset: String
    public internal(set) var tune: String?
    public internal(set) var crf: Int
    /// kb/s; 0 means crf.
    public internal(set) var bitrate: Int
    /// Seconds.
    public internal(set) var keyint: Int
    public internal(set) var profile: String
    public internal(set) var audioBitrate: Int
    // Monitoring
    public internal(set) var metricsFile: String?

    /// Every key's default, read by its own check. A default its check refuses is a mistake in
    /// the table, found by SettingTableTests before it can stop reeld here.
    public static let defaults: Settings = {
        var settings = Settings(unset: ())
        for key in SettingKey.allCases {
            if let problem = key.spec.field.write(key.defaultValue, &settings) {
                preconditionFailure("the setting table's default for \(key.rawValue) fails its own check: \(problem)")
            }
        }
        return settings
    }()

    /// Only for `defaults`, which sets every field from the table at once (SettingTableTests:
    /// each field is the field of one key, so none keeps these).
    private init(unset: Void) {
        socket = ""; controlGroup = nil; controlUser = nil; logLevel = .info
        outputDir = ""; minFreeMB = 0; fsync = .none; onFinish = []; onFinishTimeout = 0; maxDuration = nil
        outboxDir = nil; keepFreeMB = 0
        video = .none; audio = .none; size = VideoSize(width: 0, height: 0); fps = Rational(0, 1); pixelFormat = .yuyv
        sampleRate = 0; channels = 0; standby = false; preRoll = 0; preRollMaxMB = 0; previewMaxWidth = 0; previewMaxFps = 0
        preset = ""; tune = nil; crf = 0; bitrate = 0; keyint = 0; profile = ""; audioBitrate = 0
        metricsFile = nil
    }
}
