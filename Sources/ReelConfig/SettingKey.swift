import Foundation
import ReelCore
import ReelMedia
import ReelStorage

/// Every key reeld reads from `reeld.toml`, the `REEL_*` environment and its flags.
/// Precedence: flag > environment > file > default. Each key's type, default, allowed values,
/// help and documentation are declared once, in `spec` below; from it come the file's keys,
/// the flags (`--output-dir` for `output_dir`), the variables (`REEL_OUTPUT_DIR`), the checks and
/// the typed field each value is kept in once checked (`Settings.crf` for `crf`), `reeld --help`,
/// `--check-config` and config/reeld.toml (`reeld --print-config`, see `SettingDocs`).
/// The cases are in the order of config/reeld.toml.
public enum SettingKey: String, CaseIterable, Sendable {
    case socket, controlGroup = "control_group", controlUser = "control_user", logLevel = "log_level"
    case outputDir = "output_dir", minFreeMB = "min_free_mb", fsync, onFinish = "on_finish", onFinishTimeout = "on_finish_timeout"
    case maxDuration = "max_duration", outboxDir = "outbox_dir", keepFreeMB = "keep_free_mb"
    case video, audio, size, fps, pixelFormat = "pixel_format", sampleRate = "sample_rate", channels, standby
    case preRoll = "pre_roll", preRollMaxMB = "pre_roll_max_mb"
    case previewMaxWidth = "preview_max_width", previewMaxFps = "preview_max_fps"
    case preset, tune, crf, bitrate, keyint, profile, audioBitrate = "audio_bitrate"
    case metricsFile = "metrics_file"

    /// The table: one declaration per setting: its section of reeld.toml, its field in `Settings`,
    /// its default as written, its check (which is also its parser, and gives the field's type).
    /// `doc` is its comment in reeld.toml and `help` its line in `reeld --help`; in both, {range}
    /// and {values} stand for the allowed values.
    public var spec: SettingSpec {
        switch self {
        case .socket:
            return SettingSpec(.control, \.socket, .string("/run/reel/reeld.sock"), .check { Self.path($0, "socket path", max: Self.maxSocketPathBytes) }, restartToApply: true,
                serveOnly: true, help: "Control socket path when not socket-activated.",
                doc: """
                Control socket path when reeld is started without systemd socket activation. Under systemd
                the socket comes from reeld.socket (ListenStream=/run/reel/reeld.sock) and this is unused.
                """)
        case .controlGroup:
            return SettingSpec(.control, \.controlGroup, .string("reel"), .noneIfEmpty(.check { Self.accountName($0, "group") }), restartToApply: true,
                serveOnly: true, help: "Group whose members may use the control socket, besides root and reeld's own user.",
                doc: """
                Members of this group (primary or supplementary) may use reelctl; root and reeld's own user
                always may. Others get a "forbidden" error. Checked with SO_PEERCRED on each connection.
                """)
        case .controlUser:
            return SettingSpec(.control, \.controlUser, .string(""), .noneIfEmpty(.check { Self.accountName($0, "user") }), restartToApply: true,
                serveOnly: true, help: "One more user allowed to use the control socket; \"\" for none.",
                doc: "One more user allowed to use reelctl, by name; \"\" for none.")
        case .logLevel:
            return SettingSpec(.control, \.logLevel, .string(LogLevel.info.rawValue), .oneOf(LogLevel.self), restartToApply: true,
                help: "Log level: {values}.", doc: "Log level: {values}.")
        case .outputDir:
            return SettingSpec(.storage, \.outputDir, .string("/var/lib/reel"), .check { Self.path($0, "directory", max: Self.maxPathBytes) },
                serveOnly: true, help: "Directory for recordings, created if missing.",
                doc: """
                Where recordings go (created if missing). Outside /var/lib/reel, also add the directory to
                ReadWritePaths= with `systemctl edit reeld` (the unit has ProtectSystem=strict).
                """)
        case .minFreeMB:
            return SettingSpec(.storage, \.minFreeMB, .int(500), .range(0...10_000_000, unit: " MB"),
                serveOnly: true, help: "Refuse to start, and finish a recording, below this much free space in the output directory, in MB ({range}); 0 disables.",
                doc: """
                Free space in MB ({range}) below which `start` is refused and a running recording is finished
                cleanly (checked every second); 0 disables the check.
                """)
        case .fsync:
            return SettingSpec(.storage, \.fsync, .string(FsyncPolicy.fragment.rawValue), .oneOf(FsyncPolicy.self),
                help: "When a recording is synced to disk: fragment (each 0.5 s fragment, by a thread of its own) or none (the kernel's writeback).",
                doc: """
                When a recording is forced from memory to the disk: "fragment" syncs each 0.5 s fragment as it
                is written (by a thread of its own: capture never waits on the disk), so a power cut loses at
                most about a second; "none" leaves it to the kernel, which may write back 30 s later or more.
                """)
        case .onFinish:
            return SettingSpec(.storage, \.onFinish, .strings([]), .program,
                serveOnly: true, help: "Absolute path of a program run (no shell) after each completed recording with the file's path as its argument (arguments go in the config file).",
                doc: """
                A program run once for each finished file (stopped, capped, cut short by a failed source or
                write, or recovered at start-up after a crash), without a shell, with the file's path
                appended as its last argument: ["/usr/local/bin/upload", "--bucket", "clips"]. [] for none.
                Its environment says how: REEL_FINISHED_BY=stop|cap|source-failed|write-failed|error|recovery,
                and REEL_RECOVERED=1 when reeld hands the file on at a start after a crash (a recovered
                file, or one whose on_finish a crash interrupted), else 0. Its exit status is logged; stdout
                and stderr go to the journal; it runs in a process group of its own at nice 0. It runs
                inside reeld's sandbox: no network (PrivateNetwork=yes) and a read-only system, so do not
                upload from here: set outbox_dir, and the upload units move each file to the fleet's
                storage with rclone and retry (README, "Fleet: off the box").
                """)
        case .onFinishTimeout:
            return SettingSpec(.storage, \.onFinishTimeout, .int(120), .range(1...86_400, unit: " seconds"),
                serveOnly: true, help: "Seconds before the on_finish program is killed ({range}).",
                doc: """
                Seconds after which the on_finish program is killed, with every process it started ({range}). On stop, reeld waits for a
                running on_finish program, so keep this below the unit's TimeoutStopSec= (150 s) minus the
                time a recording takes to finish, or raise TimeoutStopSec= with `systemctl edit reeld`.
                """)
        case .maxDuration:
            return SettingSpec(.storage, \.maxDuration, .string("0"), .parse(Self.lengthCap, else: { LengthCap.problem(DaemonSettings.show($0, quoted: false)) }, integerToo: true),
                help: "Length cap: a recording stops by itself once it holds this many seconds (0 to \(LengthCap.maxSeconds), up to 3 decimals, e.g. 90 or 2.5); 0 for none. 'reelctl start --max-duration' overrides it.",
                doc: """
                Length cap in seconds (0 to \(LengthCap.maxSeconds); up to 3 decimals, in quotes: "2.5"): a recording stops by itself,
                its file finished, once it holds this much (pauses do not count; video to the frame, audio to
                the sample). 0 for none. 'reelctl start --max-duration S' overrides it for one recording.
                """)
        case .outboxDir:
            return SettingSpec(.storage, \.outboxDir, .string(""), .noneIfEmpty(.check(Self.outboxPath)),
                serveOnly: true, help: "Directory where every finished recording gets a hard link, waiting for an uploader (rclone move; reel-upload.service) to take it; on output_dir's file system; \"\" for none.",
                doc: """
                The outbox: every finished recording NAME.mp4 (stopped, capped, cut short or recovered) gets a
                hard link OUTBOX/NAME.mp4 there, and the outbox is synced, before on_finish runs. An uploader
                (systemd/reel-upload.service: rclone move) removes each link once the file is stored elsewhere,
                so a recording waits for upload exactly while its link is there; the file stays in output_dir.
                It must be on output_dir's file system (a hard link cannot cross one) and writable by reeld:
                the package makes "/var/lib/reel/outbox" (2770 reel:reel, so the uploader in group reel may
                remove links). reeld checks both at start and refuses to start otherwise. "" for none.
                """)
        case .keepFreeMB:
            return SettingSpec(.storage, \.keepFreeMB, .int(0), .range(0...10_000_000, unit: " MB"),
                serveOnly: true, help: "Keep this much free space in MB ({range}) by deleting the oldest recordings already uploaded (gone from outbox_dir); 0 disables. Needs outbox_dir.",
                doc: """
                Free space in MB ({range}) to keep on output_dir's file system: below it, reeld deletes the
                oldest finished recordings that have left the outbox (uploaded), one at a time, each logged,
                until it is back (checked every second). Never a recording still waiting in the outbox, the
                one in progress, a .part, or a file without Reel's signature. Needs outbox_dir; keep it
                above min_free_mb, which stops a recording when nothing more can be freed. 0 disables.
                """)
        // A capture box records its camera and microphone (tests and the demo ask for "test").
        case .video:
            return SettingSpec(.sources, \.video, .string("/dev/video0"), .parse(VideoSourceSetting.init(parsing:), else: { Self.badSource("video", $0) }),
                help: "Video source: a V4L2 camera '/dev/videoN' (or 'v4l2:/dev/videoN'), 'y4m:PATH' (a YUV4MPEG2 file), 'test' (the synthetic sync source) or 'none'; see --list-devices.",
                doc: """
                Video source: a V4L2 camera "/dev/videoN" (or "v4l2:/dev/videoN"; 'reelctl devices' lists them),
                "y4m:PATH" (a YUV4MPEG2 file), "test" (the synthetic sync source) or "none".
                """)
        case .audio:
            return SettingSpec(.sources, \.audio, .string("alsa:default"), .parse(AudioSourceSetting.init(parsing:), else: { Self.badSource("audio", $0) }),
                help: "Audio source: an ALSA capture device 'alsa:NAME' (alsa:hw:1,0, alsa:plughw:1,0, alsa:default), 'wav:PATH' (16-bit PCM), 'test' (the synthetic sync source) or 'none'.",
                doc: """
                Audio source: an ALSA capture device "alsa:NAME" ("alsa:default", "alsa:hw:1,0", "alsa:plughw:1,0"),
                "wav:PATH" (16-bit PCM), "test" (the synthetic sync source) or "none".
                """)
        case .size:
            return SettingSpec(.sources, \.size, .string("640x360"), .parse(VideoSize.init(parsing:), else: Self.badSize),
                help: "Video size WxH, even numbers from \(Self.sizeText).",
                doc: "Video size \"WxH\", even numbers from \(Self.sizeText).")
        case .fps:
            return SettingSpec(.sources, \.fps, .string("30"), .parse(Self.frameRate, else: Self.badFrameRate, integerToo: true),
                help: "Frame rate: N or N/D from \(Self.fpsText), e.g. 30 or 30000/1001.",
                doc: "Frame rate: an integer, or \"N/D\" such as \"30000/1001\"; from \(Self.fpsText).")
        case .pixelFormat:
            // One list of pixel formats: the camera's (it accepts "i420" for "yuv420").
            return SettingSpec(.sources, \.pixelFormat, .string("yuyv"), .parse(CameraPixelFormat.init(name:), else: Self.badPixelFormat),
                help: "Source pixel format: yuyv, uyvy, nv12, yuv420 (= i420); cameras also mjpeg.",
                doc: "Source pixel format: \"yuyv\", \"uyvy\", \"nv12\", \"yuv420\" (also \"i420\") or, from a camera, \"mjpeg\".")
        case .sampleRate:
            return SettingSpec(.sources, \.sampleRate, .int(48000), .range(8000...192_000, unit: " Hz"),
                help: "Audio sample rate in Hz ({range}).", doc: "Audio sample rate in Hz ({range}).")
        case .channels:
            return SettingSpec(.sources, \.channels, .int(1), .range(1...AACEncoder.maxChannels, unit: ""),
                help: "Audio channels ({range}; each recorded full-band: 3 are front left, right and centre).",
                doc: "Audio channels ({range}). Each is recorded full-band (3 are front left, right and centre); 6 to 8 are not offered: AAC would code one of them as a low-passed LFE.")
        case .standby:
            return SettingSpec(.sources, \.standby, .bool(false), .boolean,
                serveOnly: true, help: "Keep the camera and microphone open and streaming while idle (nothing is encoded or stored), so that 'start' records from the next frame and 'snapshot' answers at once: true or false.",
                doc: """
                Keep the camera and microphone open and streaming while idle (true), so that `start` and
                `snapshot` take the next captured frame; nothing is encoded or stored until `start`. false (the
                default): an open camera keeps its light on, holds the device from other programs and costs
                CPU and power all day. A device that fails while idle is retried; `status` says so.
                """)
        // Pre-roll (issue 25): both keys in one block.
        case .preRoll:
            return SettingSpec(.sources, \.preRoll, .string("0"), .parse(PreRoll.parse, else: { PreRoll.problem(DaemonSettings.show($0, quoted: false)) }, integerToo: true),
                serveOnly: true, help: "Pre-roll: with standby, 'start' records from this many seconds before it (0 to \(PreRoll.maxSeconds), up to 3 decimals, e.g. 1.5), kept as raw frames in memory; 0 for none. Needs standby = true; 'reelctl start --pre-roll' asks for less.",
                doc: """
                Pre-roll in seconds (0 to \(PreRoll.maxSeconds); up to 3 decimals, in quotes: "1.5"): a `start` records from this
                long before the request reached reeld, so the moment before the press is kept. Needs standby = true:
                the warm devices keep the last pre_roll of raw frames and audio in memory while idle (no CPU:
                nothing is encoded until `start`), at most pre_roll_max_mb. 0 (the default) for none.
                'reelctl start --pre-roll S' asks for less for one recording.
                """)
        case .preRollMaxMB:
            return SettingSpec(.sources, \.preRollMaxMB, .int(256), .range(1...1_000_000, unit: " MB"),
                serveOnly: true, help: "Most memory the pre-roll may hold, in MB ({range}): a pre_roll needing more at the size and fps is refused at start-up.",
                doc: """
                Most memory the pre-roll may hold in MB ({range}): its raw frames and audio at the configured
                size and frame rate (640x360 YUYV at 30 fps: about 14 MB a second, 1280x720: 55 MB). A pre_roll
                needing more is refused at start-up and on SIGHUP. 256 keeps 3 s of 720p30 on a 1 GB board.
                """)
        case .previewMaxWidth:
            return SettingSpec(.sources, \.previewMaxWidth, .int(1280), .range(16...7680, unit: " pixels"),
                serveOnly: true, help: "Widest live preview a control client may ask for ('reelctl preview --width'), in pixels ({range}); never wider than the camera.",
                doc: """
                Widest live preview ('preview' on the control socket, 'reelctl preview') in pixels ({range});
                never wider than the camera. JPEG frames are encoded only while someone watches, on a
                thread of their own; a wider one costs more CPU per frame.
                """)
        case .previewMaxFps:
            return SettingSpec(.sources, \.previewMaxFps, .int(15), .range(1...60, unit: " frames a second"),
                serveOnly: true, help: "Highest live preview frame rate a control client may ask for ({range}); never above the camera's.",
                doc: "Highest live preview frame rate a control client may ask for ({range}); never above the camera's.")
        case .preset:
            return SettingSpec(.encoding, \.preset, .string("veryfast"), .oneOf(H264Encoder.presets),
                help: "x264 preset: {values}.", doc: "x264 preset: {values}.")
        case .tune:
            return SettingSpec(.encoding, \.tune, .string(""), .noneIfEmpty(.check(Self.tune)),
                help: "x264 tune: {values}, or one of the first six joined with fastdecode and/or zerolatency by commas; \"\" for none.",
                doc: """
                x264 tune: {values}, or one of the
                first six joined with fastdecode and/or zerolatency by commas ("film,zerolatency"); "" for none.
                """, values: Self.psyTunes + Self.speedTunes)
        case .crf:
            // crf 0 is lossless, which none of the profiles allowed here can encode (x264 refuses it).
            return SettingSpec(.encoding, \.crf, .int(23), .range(1...51, unit: "; 0, lossless, needs a profile reeld does not offer"),
                help: "x264 constant rate factor ({range}, lower is better and bigger); ignored when --bitrate is set.",
                doc: "x264 constant rate factor ({range}, lower is better and bigger); ignored when bitrate > 0.")
        case .bitrate:
            return SettingSpec(.encoding, \.bitrate, .int(0), .range(0...1_000_000, unit: " kb/s; 0 means use crf"),
                help: "Average video bitrate in kb/s ({range}) instead of crf; 0 uses crf.",
                doc: "Average video bitrate in kb/s ({range}) instead of crf; 0 uses crf.")
        case .keyint:
            return SettingSpec(.encoding, \.keyint, .int(2), .range(1...60, unit: " seconds"),
                help: "Keyframe interval in seconds ({range}).", doc: "Keyframe interval in seconds ({range}).")
        case .profile:
            return SettingSpec(.encoding, \.profile, .string("high"), .oneOf(["baseline", "main", "high"]),
                help: "H.264 profile: {values}.", doc: "H.264 profile: {values}.")
        case .audioBitrate:
            return SettingSpec(.encoding, \.audioBitrate, .int(128_000), .range(8000...512_000, unit: " b/s"),
                help: "AAC bitrate in b/s ({range}); above what AAC carries (6 x rate x channels: 96000 at 16 kHz mono) it is lowered to that.",
                doc: """
                AAC bitrate in b/s ({range}). Above what AAC carries (6 x rate x channels: 96000 at 16 kHz
                mono) it is lowered to that.
                """)
        case .metricsFile:
            return SettingSpec(.monitoring, \.metricsFile, .string(""), .noneIfEmpty(.check(Self.metricsPath)), restartToApply: true,
                serveOnly: true, help: "A file to rewrite once a second with reeld's metrics in the Prometheus text format, for node_exporter's textfile collector (e.g. /var/lib/node_exporter/textfile_collector/reel.prom); \"\" for none.",
                doc: """
                A file reeld rewrites once a second with its metrics in the Prometheus text format, for
                node_exporter's textfile collector: "/var/lib/reel-metrics/reel.prom" (README: Fleet
                monitoring). "" for none. It is written as PATH.tmp (created, never through a link) and
                renamed, so a reader never sees half a file, and removed when reeld stops. Give it a
                directory only reeld may write (no group-writable one); under systemd, also add it to
                ReadWritePaths= with `systemctl edit reeld` (the unit has ProtectSystem=strict).
                """)
        }
    }

    typealias Kind = SettingSpec.Kind
    var kind: Kind { spec.kind }
    /// `--output-dir` for `output_dir`.
    public var flag: String { "--" + rawValue.replacingOccurrences(of: "_", with: "-") }
    /// `REEL_OUTPUT_DIR` for `output_dir`.
    public var environmentVariable: String { "REEL_" + rawValue.uppercased() }
    public var defaultValue: SettingValue { spec.defaultValue }

    /// The allowed range of an integer key, and its unit for messages; nil for the other kinds.
    var intRange: (range: ClosedRange<Int>, unit: String)? {
        if case let .range(r, unit) = spec.rule { return (r, unit) }
        return nil
    }

    /// The one check of every key's value: nil when fine, else what is wrong and what to use instead.
    func problem(_ v: SettingValue) -> String? { spec.check(v) }
}
