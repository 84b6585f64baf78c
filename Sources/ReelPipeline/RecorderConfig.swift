import Foundation
import Logging
import ReelCapture
import ReelCore
import ReelMedia
import ReelStorage

/// Which sources and encoder settings a recording uses.
public struct RecorderConfig: Sendable {
    public enum Video: Sendable {
        case none, test(VideoFormat)
        /// A YUV4MPEG2 file (`--video y4m:PATH`).
        case y4m(path: String, VideoFormat)
        /// A V4L2 camera (`/dev/videoN`) at exactly this format, size and rate.
        case v4l2(device: String, CameraRequest)
    }
    public enum Audio: Sendable {
        case none, test(AudioFormat, skewPpm: Int64)
        /// A 16-bit PCM WAV file (`--audio wav:PATH`).
        case wav(path: String, AudioFormat)
        /// An ALSA capture device (`hw:1,0`, `plughw:1,0`, `default`, ...).
        case alsa(device: String, AudioFormat)
    }
    public var outputDir: String
    public var video: Video
    public var audio: Audio
    public var paced: Bool
    public var h264: H264Settings
    public var aac: AACSettings
    /// Resample the audio so its sample clock follows CLOCK_MONOTONIC (see `DriftLock`).
    public var driftLock: Bool
    /// Refuse to start, and finish a recording, when the output file system has less free space (0: no check).
    public var minFreeBytes: Int64 = 0
    /// When the file is synced to disk (see `FsyncPolicy`).
    public var fsync: FsyncPolicy = .fragment
    /// Program and arguments run after each completed recording, with the file's path appended (empty: none).
    public var onFinish: [String] = []
    public var onFinishTimeoutNs: Nanos = 120 * nanosPerSecond
    /// Where each finished recording is hard-linked for upload (`outbox_dir`; nil: none).
    public var outboxDir: String?
    /// Free space kept by deleting uploaded recordings (`keep_free_mb`; 0: none).
    public var keepFreeBytes: Int64 = 0
    /// The length cap: kept output (ns) at which a recording stops by itself (nil: none).
    public var maxDuration: Nanos?
    /// Camera controls set at every open of a V4L2 camera, in order: `[camera.controls]` from
    /// the config file, then what `reelctl set` changed since reeld started (later wins).
    public var cameraControls: [CameraControlAssignment] = []
    /// Keep the live sources open and streaming while idle (`standby`; see `StandbyState`).
    public var standby = false
    /// With standby: a `start` records from this long (ns) before its request (`pre_roll`; see `PreRoll`).
    public var preRoll: Nanos = 0
    /// The bounds of a live preview (`preview_max_width`, `preview_max_fps`).
    public var previewMaxWidth = 1280
    public var previewMaxFps = 15
    public init(outputDir: String, video: Video, audio: Audio, paced: Bool, h264: H264Settings, aac: AACSettings,
                driftLock: Bool = true) {
        self.outputDir = outputDir; self.video = video; self.audio = audio; self.paced = paced; self.h264 = h264; self.aac = aac
        self.driftLock = driftLock
    }
    /// What the pipeline receives from the video source (a camera's MJPEG arrives as I420).
    public var videoFormat: VideoFormat? {
        switch video {
        case .none: return nil
        case let .test(f), let .y4m(_, f): return f
        case let .v4l2(_, r): return VideoFormat(width: r.width, height: r.height, fps: r.fps, pixelFormat: r.pixelFormat.delivered)
        }
    }
    public var audioFormat: AudioFormat? {
        switch audio {
        case .none: return nil
        case let .test(f, _), let .wav(_, f), let .alsa(_, f): return f
        }
    }
    /// The video source as status shows it while idle, e.g. "v4l2 /dev/video0 640x360 30 yuyv".
    public var videoDescription: String {
        switch video {
        case .none: return "none"
        case let .test(f): return "test \(f.width)x\(f.height) \(f.fps) \(f.pixelFormat.rawValue)"
        case let .y4m(path, f): return "y4m:\(path) \(f.width)x\(f.height) \(f.fps) \(f.pixelFormat.rawValue)"
        case let .v4l2(d, r): return "v4l2 \(d) \(r.width)x\(r.height) \(r.fps) \(r.pixelFormat.rawValue)"
        }
    }
    public var audioDescription: String {
        switch audio {
        case .none: return "none"
        case let .test(f, _): return "test \(f.sampleRate) Hz \(f.channels) ch"
        case let .wav(path, f): return "wav:\(path) \(f.sampleRate) Hz \(f.channels) ch"
        case let .alsa(d, f): return "alsa \(d) \(f.sampleRate) Hz \(f.channels) ch"
        }
    }

    /// Opens the capture sources this configuration names (not started); `videoOnly`: no audio.
    /// `preRoll`: each live source's pool gets the extra slots that hold it (`PreRoll`), which
    /// are returned (video, audio).
    package func openSources(logger: Logger, videoOnly: Bool = false, preRoll: PreRoll = PreRoll(0)) throws
        -> (video: (any CaptureSource)?, audio: (any CaptureSource)?, extraSlots: (video: Int, audio: Int)) {
        let vs: (any CaptureSource)?
        var extra = (video: 0, audio: 0)
        switch video {
        case .none: vs = nil
        case let .test(f):
            extra.video = paced ? preRoll.videoSlots(fps: f.fps) : 0
            vs = TestVideoSource(format: f, paced: paced, extraSlots: extra.video)
        case let .y4m(path, _): vs = try FileVideoSource(path: path, paced: paced)
        case let .v4l2(device, request):
            extra.video = preRoll.videoSlots(fps: request.fps)
            vs = try V4L2VideoSource(path: device, request: request, logger: logger, controls: cameraControls, extraSlots: extra.video)
        }
        guard !videoOnly else { return (vs, nil, (extra.video, 0)) }
        let aso: (any CaptureSource)?
        switch audio {
        case .none: aso = nil
        case let .test(f, skew):
            extra.audio = paced ? preRoll.audioSlots(chunkFrames: f.sampleRate / 100, sampleRate: f.sampleRate) : 0
            aso = TestAudioSource(format: f, skewPpm: skew, paced: paced, poolSlots: 200 + extra.audio)
        case let .wav(path, _): aso = try FileAudioSource(path: path, paced: paced)
        case let .alsa(device, f):
            let a = try ALSAAudioSource(device: device, format: f, logger: logger, preRoll: preRoll)
            extra.audio = a.extraSlots
            aso = a
        }
        return (vs, aso, extra)
    }
}
