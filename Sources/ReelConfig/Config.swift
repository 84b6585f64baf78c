import Foundation
import ReelCore
import ReelMedia
import ReelStorage
import ReelSystem

/// One setting's value, as TOML types it.
public enum SettingValue: Sendable, Equatable, CustomStringConvertible {
    case string(String)
    case int(Int)
    case strings([String])
    case bool(Bool)

    public var description: String {
        switch self {
        case let .string(s): return "\"\(s)\""
        case let .int(i): return String(i)
        case let .strings(a): return "[" + a.map { "\"\($0)\"" }.joined(separator: ", ") + "]"
        case let .bool(b): return String(b)
        }
    }
}

/// Every key reeld reads from `reeld.toml`, the `REEL_*` environment and its flags.
/// Precedence: flag > environment > file > default. Each key's type, default, allowed values,
/// help and documentation are declared once, in `spec` below; from it come the file's keys,
/// the flags (`--output-dir` for `output_dir`), the variables (`REEL_OUTPUT_DIR`), the checks,
/// `reeld --help`, `--check-config` and config/reeld.toml (`reeld --print-config`, see `SettingDocs`).
/// The cases are in the order of config/reeld.toml.
public enum SettingKey: String, CaseIterable, Sendable {
    case socket, controlGroup = "control_group", controlUser = "control_user", logLevel = "log_level"
    case outputDir = "output_dir", minFreeMB = "min_free_mb", fsync, onFinish = "on_finish", onFinishTimeout = "on_finish_timeout"
    case maxDuration = "max_duration"
    case video, audio, size, fps, pixelFormat = "pixel_format", sampleRate = "sample_rate", channels, standby
    case preset, tune, crf, bitrate, keyint, profile, audioBitrate = "audio_bitrate"
    case metricsFile = "metrics_file"

    /// The table: one declaration per setting. `doc` is its comment in reeld.toml and `help` its
    /// line in `reeld --help`; in both, {range} and {values} stand for the allowed values.
    public var spec: SettingSpec {
        switch self {
        case .socket:
            return SettingSpec(.control, .string("/run/reel/reeld.sock"), .check { Self.path($0, "socket path", max: Self.maxSocketPathBytes) }, restartToApply: true,
                serveOnly: true, help: "Control socket path when not socket-activated.",
                doc: """
                Control socket path when reeld is started without systemd socket activation. Under systemd
                the socket comes from reeld.socket (ListenStream=/run/reel/reeld.sock) and this is unused.
                """)
        case .controlGroup:
            return SettingSpec(.control, .string("reel"), .check { Self.accountName($0, "group") }, restartToApply: true,
                serveOnly: true, help: "Group whose members may use the control socket, besides root and reeld's own user.",
                doc: """
                Members of this group (primary or supplementary) may use reelctl; root and reeld's own user
                always may. Others get a "forbidden" error. Checked with SO_PEERCRED on each connection.
                """)
        case .controlUser:
            return SettingSpec(.control, .string(""), .check { Self.accountName($0, "user") }, restartToApply: true,
                serveOnly: true, help: "One more user allowed to use the control socket; \"\" for none.",
                doc: "One more user allowed to use reelctl, by name; \"\" for none.")
        case .logLevel:
            return SettingSpec(.control, .string("info"), .oneOf(["trace", "debug", "info", "notice", "warning", "error", "critical"]), restartToApply: true,
                help: "Log level: {values}.", doc: "Log level: {values}.")
        case .outputDir:
            return SettingSpec(.storage, .string("/var/lib/reel"), .check { Self.path($0, "directory", max: Self.maxPathBytes) },
                serveOnly: true, help: "Directory for recordings, created if missing.",
                doc: """
                Where recordings go (created if missing). Outside /var/lib/reel, also add the directory to
                ReadWritePaths= with `systemctl edit reeld` (the unit has ProtectSystem=strict).
                """)
        case .minFreeMB:
            return SettingSpec(.storage, .int(500), .range(0...10_000_000, unit: " MB"),
                serveOnly: true, help: "Refuse to start, and finish a recording, below this much free space in the output directory, in MB ({range}); 0 disables.",
                doc: """
                Free space in MB ({range}) below which `start` is refused and a running recording is finished
                cleanly (checked every second); 0 disables the check.
                """)
        case .fsync:
            return SettingSpec(.storage, .string(FsyncPolicy.fragment.rawValue), .oneOf(FsyncPolicy.allCases.map(\.rawValue)),
                help: "When a recording is synced to disk: fragment (each 0.5 s fragment, by a thread of its own) or none (the kernel's writeback).",
                doc: """
                When a recording is forced from memory to the disk: "fragment" syncs each 0.5 s fragment as it
                is written (by a thread of its own: capture never waits on the disk), so a power cut loses at
                most about a second; "none" leaves it to the kernel, which may write back 30 s later or more.
                """)
        case .onFinish:
            return SettingSpec(.storage, .strings([]), .program,
                serveOnly: true, help: "Absolute path of a program run (no shell) after each completed recording with the file's path as its argument (arguments go in the config file).",
                doc: """
                A program run once for each finished file (stopped, capped, cut short by a failed source or
                write, or recovered at start-up after a crash), without a shell, with the file's path
                appended as its last argument: ["/usr/local/bin/upload", "--bucket", "clips"]. [] for none.
                Its environment says how: REEL_FINISHED_BY=stop|cap|source-failed|write-failed|error|recovery,
                and REEL_RECOVERED=1 when reeld hands the file on at a start after a crash (a recovered
                file, or one whose on_finish a crash interrupted), else 0. Its exit status is logged; stdout
                and stderr go to the journal; it runs in a process group of its own at nice 0. It runs
                inside reeld's sandbox: no network (PrivateNetwork=yes) and a read-only system, so an
                uploader should hand the file on, e.g. move it into a spool directory watched by its own
                .path/.service units, rather than upload from here (or relax the sandbox with
                `systemctl edit reeld`).
                """)
        case .onFinishTimeout:
            return SettingSpec(.storage, .int(120), .range(1...86_400, unit: " seconds"),
                serveOnly: true, help: "Seconds before the on_finish program is killed ({range}).",
                doc: """
                Seconds after which the on_finish program is killed, with every process it started ({range}). On stop, reeld waits for a
                running on_finish program, so keep this below the unit's TimeoutStopSec= (150 s) minus the
                time a recording takes to finish, or raise TimeoutStopSec= with `systemctl edit reeld`.
                """)
        case .maxDuration:
            return SettingSpec(.storage, .string("0"), .check { LengthCap.parse($0) != nil ? nil : LengthCap.problem(DaemonSettings.show($0, quoted: false)) }, integerToo: true,
                help: "Length cap: a recording stops by itself once it holds this many seconds (0 to \(LengthCap.maxSeconds), up to 3 decimals, e.g. 90 or 2.5); 0 for none. 'reelctl start --max-duration' overrides it.",
                doc: """
                Length cap in seconds (0 to \(LengthCap.maxSeconds); up to 3 decimals, in quotes: "2.5"): a recording stops by itself,
                its file finished, once it holds this much (pauses do not count; video to the frame, audio to
                the sample). 0 for none. 'reelctl start --max-duration S' overrides it for one recording.
                """)
        // A capture box records its camera and microphone (tests and the demo ask for "test").
        case .video:
            return SettingSpec(.sources, .string("/dev/video0"), .check { VideoSourceSetting(parsing: $0) != nil ? nil : Self.badSource("video", $0) },
                help: "Video source: a V4L2 camera '/dev/videoN' (or 'v4l2:/dev/videoN'), 'y4m:PATH' (a YUV4MPEG2 file), 'test' (the synthetic sync source) or 'none'; see --list-devices.",
                doc: """
                Video source: a V4L2 camera "/dev/videoN" (or "v4l2:/dev/videoN"; 'reelctl devices' lists them),
                "y4m:PATH" (a YUV4MPEG2 file), "test" (the synthetic sync source) or "none".
                """)
        case .audio:
            return SettingSpec(.sources, .string("alsa:default"), .check { AudioSourceSetting(parsing: $0) != nil ? nil : Self.badSource("audio", $0) },
                help: "Audio source: an ALSA capture device 'alsa:NAME' (alsa:hw:1,0, alsa:plughw:1,0, alsa:default), 'wav:PATH' (16-bit PCM), 'test' (the synthetic sync source) or 'none'.",
                doc: """
                Audio source: an ALSA capture device "alsa:NAME" ("alsa:default", "alsa:hw:1,0", "alsa:plughw:1,0"),
                "wav:PATH" (16-bit PCM), "test" (the synthetic sync source) or "none".
                """)
        case .size:
            return SettingSpec(.sources, .string("640x360"), .check { Self.videoSize($0) != nil ? nil : Self.badSize($0) },
                help: "Video size WxH, even numbers from \(Self.sizeText).",
                doc: "Video size \"WxH\", even numbers from \(Self.sizeText).")
        case .fps:
            return SettingSpec(.sources, .string("30"), .check { Self.frameRate($0) != nil ? nil : Self.badFrameRate($0) }, integerToo: true,
                help: "Frame rate: N or N/D from \(Self.fpsText), e.g. 30 or 30000/1001.",
                doc: "Frame rate: an integer, or \"N/D\" such as \"30000/1001\"; from \(Self.fpsText).")
        case .pixelFormat:
            // One list of pixel formats: the camera's (it accepts "i420" for "yuv420").
            return SettingSpec(.sources, .string("yuyv"), .check { CameraPixelFormat(name: $0) != nil ? nil : Self.badPixelFormat($0) },
                help: "Source pixel format: yuyv, uyvy, nv12, yuv420 (= i420); cameras also mjpeg.",
                doc: "Source pixel format: \"yuyv\", \"uyvy\", \"nv12\", \"yuv420\" (also \"i420\") or, from a camera, \"mjpeg\".")
        case .sampleRate:
            return SettingSpec(.sources, .int(48000), .range(8000...192_000, unit: " Hz"),
                help: "Audio sample rate in Hz ({range}).", doc: "Audio sample rate in Hz ({range}).")
        case .channels:
            return SettingSpec(.sources, .int(1), .range(1...8, unit: ""),
                help: "Audio channels ({range}).", doc: "Audio channels ({range}).")
        case .standby:
            return SettingSpec(.sources, .bool(false), .boolean,
                serveOnly: true, help: "Keep the camera and microphone open and streaming while idle (nothing is encoded or stored), so that 'start' records from the next frame and 'snapshot' answers at once: true or false.",
                doc: """
                Keep the camera and microphone open and streaming while idle (true), so that `start` and
                `snapshot` take the next captured frame; nothing is encoded or stored until `start`. false (the
                default): an open camera keeps its light on, holds the device from other programs and costs
                CPU and power all day. A device that fails while idle is retried; `status` says so.
                """)
        case .preset:
            return SettingSpec(.encoding, .string("veryfast"), .oneOf(H264Encoder.presets),
                help: "x264 preset: {values}.", doc: "x264 preset: {values}.")
        case .tune:
            return SettingSpec(.encoding, .string(""), .check(Self.tune),
                help: "x264 tune: {values}, or one of the first six joined with fastdecode and/or zerolatency by commas; \"\" for none.",
                doc: """
                x264 tune: {values}, or one of the
                first six joined with fastdecode and/or zerolatency by commas ("film,zerolatency"); "" for none.
                """, values: Self.psyTunes + Self.speedTunes)
        case .crf:
            // crf 0 is lossless, which none of the profiles allowed here can encode (x264 refuses it).
            return SettingSpec(.encoding, .int(23), .range(1...51, unit: "; 0, lossless, needs a profile reeld does not offer"),
                help: "x264 constant rate factor ({range}, lower is better and bigger); ignored when --bitrate is set.",
                doc: "x264 constant rate factor ({range}, lower is better and bigger); ignored when bitrate > 0.")
        case .bitrate:
            return SettingSpec(.encoding, .int(0), .range(0...1_000_000, unit: " kb/s; 0 means use crf"),
                help: "Average video bitrate in kb/s ({range}) instead of crf; 0 uses crf.",
                doc: "Average video bitrate in kb/s ({range}) instead of crf; 0 uses crf.")
        case .keyint:
            return SettingSpec(.encoding, .int(2), .range(1...60, unit: " seconds"),
                help: "Keyframe interval in seconds ({range}).", doc: "Keyframe interval in seconds ({range}).")
        case .profile:
            return SettingSpec(.encoding, .string("high"), .oneOf(["baseline", "main", "high"]),
                help: "H.264 profile: {values}.", doc: "H.264 profile: {values}.")
        case .audioBitrate:
            return SettingSpec(.encoding, .int(128_000), .range(8000...512_000, unit: " b/s"),
                help: "AAC bitrate in b/s ({range}); above what AAC carries (6 x rate x channels: 96000 at 16 kHz mono) it is lowered to that.",
                doc: """
                AAC bitrate in b/s ({range}). Above what AAC carries (6 x rate x channels: 96000 at 16 kHz
                mono) it is lowered to that.
                """)
        case .metricsFile:
            return SettingSpec(.monitoring, .string(""), .check(Self.metricsPath), restartToApply: true,
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

    /// x264's psychovisual tunes (at most one) and the two that combine with them.
    static let psyTunes = ["film", "animation", "grain", "stillimage", "psnr", "ssim"]
    static let speedTunes = ["fastdecode", "zerolatency"]
    /// The longest path the kernel takes (PATH_MAX includes the NUL) and the longest Unix socket path.
    static let maxPathBytes = Int(PATH_MAX) - 1
    static let maxSocketPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// The one check of every key's value: nil when fine, else what is wrong and what to use instead.
    func problem(_ v: SettingValue) -> String? {
        let rule = spec.rule
        switch rule {
        case .boolean:
            guard case .bool = v else { return "expected true or false" }
            return nil
        case let .range(r, unit):
            guard case let .int(i) = v else { return "expected an integer" }
            return r.contains(i) ? nil : "\(i) is out of range (use \(r.lowerBound) to \(r.upperBound)\(unit))"
        case .program:
            guard case let .strings(a) = v else { return "expected an array of strings" }
            if let first = a.first, !first.hasPrefix("/") { return "the program \(Self.show(first)) must be an absolute path (it is run without a shell)" }
            if let first = a.first, first.utf8.count > Self.maxPathBytes { return "the program's path is \(first.utf8.count) bytes, longer than a path can be (\(Self.maxPathBytes))" }
            return nil
        case .oneOf, .check:
            // fps may have been written as an integer; it arrives as a string.
            guard case let .string(t) = v else { return kind == .stringOrInt ? "expected an integer or a string" : "expected a string" }
            if let c = t.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7f }) {
                return "\(Self.show(t)) contains the control character U+\(String(c.value, radix: 16, uppercase: true).leftPadded(4)) (remove it)"
            }
            switch rule {
            case let .oneOf(allowed): return allowed.contains(t) ? nil : "\(Self.show(t)) is not one of \(allowed.joined(separator: ", "))"
            case let .check(check): return check(t)
            case .range, .program, .boolean: return nil  // handled above
            }
        }
    }

    // MARK: the checks the table names, and the parsers that share them

    private static func show(_ t: String) -> String { DaemonSettings.show(t) }

    private static func path(_ t: String, _ what: String, max: Int) -> String? {
        if t.isEmpty { return "must not be empty (give a \(what))" }
        if t.utf8.count > max { return "the \(what) is \(t.utf8.count) bytes; at most \(max) work (choose a shorter one)" }
        return nil
    }

    /// A user or group name as useradd/groupadd accept it; "" for none.
    private static func accountName(_ t: String, _ what: String) -> String? {
        let ok = t.utf8.count <= 32 && t.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "_.-$".unicodeScalars.contains($0)
        } && !t.hasPrefix("-")
        return ok ? nil : "\(show(t)) is not a \(what) name (letters, digits, _ . -, at most 32; \"\" for none)"
    }

    /// "" (none) or an absolute path of a file.
    private static func metricsPath(_ t: String) -> String? {
        if t.isEmpty { return nil }
        if !t.hasPrefix("/") || t.hasSuffix("/") { return "\(show(t)) is not an absolute path of a file (e.g. \"/var/lib/node_exporter/textfile_collector/reel.prom\"; \"\" for none)" }
        return path(t, "path", max: maxPathBytes - 4)  // and PATH.tmp
    }

    private static func tune(_ t: String) -> String? {
        guard !t.isEmpty else { return nil }
        let parts = t.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let known = psyTunes + speedTunes
        if let bad = parts.first(where: { !known.contains($0) }) {
            return "\(show(bad)) is not an x264 tune (use one of \(known.joined(separator: ", ")), or several joined by commas, or \"\" for none)"
        }
        if parts.filter({ psyTunes.contains($0) }).count > 1 || Set(parts).count != parts.count {
            return "\(show(t)) combines tunes x264 cannot (at most one of \(psyTunes.joined(separator: ", ")), plus fastdecode and/or zerolatency)"
        }
        return nil
    }

    private static func badSource(_ which: String, _ t: String) -> String {
        which == "video"
            ? "unsupported --video \(show(t)) (use a camera such as /dev/video0 or v4l2:/dev/video0, 'y4m:PATH', 'test' or 'none'; see 'reeld --list-devices')"
            : "unsupported --audio \(show(t)) (use an ALSA device such as alsa:default or alsa:hw:1,0, 'wav:PATH', 'test' or 'none'; see 'reeld --list-devices')"
    }

    private static func badPixelFormat(_ t: String) -> String {
        "\(show(t)) is not one of \((CameraPixelFormat.allCases.map(\.rawValue) + ["i420"]).joined(separator: ", "))"
    }

    static let widths = 16...7680, heights = 16...4320
    static var sizeText: String { "\(widths.lowerBound)x\(heights.lowerBound) to \(widths.upperBound)x\(heights.upperBound)" }
    private static func badSize(_ t: String) -> String { "\(show(t)) is not WxH with even numbers from \(sizeText), e.g. \"640x360\"" }

    /// A `size` value as width and height; nil unless it is WxH with even numbers in range.
    public static func videoSize(_ t: String) -> (width: Int, height: Int)? {
        let p = t.split(separator: "x", omittingEmptySubsequences: false)
        guard p.count == 2, let w = Int(p[0]), let h = Int(p[1]), w % 2 == 0, h % 2 == 0, widths.contains(w), heights.contains(h) else { return nil }
        return (w, h)
    }

    static let maxFps: Int64 = 240
    static var fpsText: String { "1 to \(maxFps)" }
    private static func badFrameRate(_ t: String) -> String { "\(show(t)) is not N or N/D from \(fpsText), e.g. 30 or \"30000/1001\"" }

    /// An `fps` value as a rate; nil unless it is N or N/D from 1 to 240.
    public static func frameRate(_ t: String) -> Rational? {
        // Bounds checked before multiplying, so no value can overflow.
        guard let r = Rational(parsing: t), r.den <= 1_000_000, r.num >= r.den, r.num <= maxFps * r.den else { return nil }
        return r
    }
}

/// One setting's declaration (see `SettingKey.spec`).
public struct SettingSpec: Sendable {
    /// How the value is typed in the file (flags and the environment give strings).
    public enum Kind: Sendable { case string, int, stringOrInt, strings, bool }
    /// The parts of reeld.toml, in order.
    public enum Section: String, CaseIterable, Sendable {
        case control = "Control", storage = "Storage", sources = "Sources", encoding = "Encoding", monitoring = "Monitoring"
    }
    /// What values are allowed: the single place each is checked.
    public enum Rule: Sendable {
        /// An integer in range; `unit` follows the range in messages (" Hz", "; 0 means ...").
        case range(ClosedRange<Int>, unit: String)
        case oneOf([String])
        /// A program and its arguments (`on_finish`).
        case program
        /// true or false.
        case boolean
        /// Any other string: nil when fine, else what is wrong and the fix.
        case check(@Sendable (String) -> String?)
    }

    public let section: Section
    public let defaultValue: SettingValue
    public let rule: Rule
    public let kind: Kind
    /// For `--help` and reeld.toml: {range} and {values} expanded, nothing else to keep in step.
    public let help: String
    public let doc: String
    /// Read once at start-up: a SIGHUP reload does not change it (reeld warns).
    public let restartToApply: Bool
    /// A setting of the daemon (`reeld serve`: its socket, output directory, hooks, standby,
    /// metrics) that a one-shot `reeld record` has no use for: given to it as a flag it is an
    /// error, in the environment a warning, in the shared config file nothing.
    public let serveOnly: Bool

    /// `integerToo`: a string that may be written as an integer (fps = 30, or "30000/1001").
    init(_ section: Section, _ defaultValue: SettingValue, _ rule: Rule, integerToo: Bool = false, restartToApply: Bool = false,
         serveOnly: Bool = false, help: String, doc: String, values: [String]? = nil) {
        self.section = section
        self.restartToApply = restartToApply
        self.serveOnly = serveOnly
        self.defaultValue = defaultValue
        self.rule = rule
        switch rule {
        case .range: kind = .int
        case .program: kind = .strings
        case .boolean: kind = .bool
        default: kind = integerToo ? .stringOrInt : .string
        }
        var expand: [(String, String)] = []
        if case let .range(r, _) = rule { expand.append(("{range}", "\(r.lowerBound) to \(r.upperBound)")) }
        if case let .oneOf(v) = rule { expand.append(("{values}", v.joined(separator: ", "))) }
        if let values { expand.append(("{values}", values.joined(separator: ", "))) }
        self.help = expand.reduce(help) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
        self.doc = expand.reduce(doc) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
    }
}

/// A `video` value: the one parser of what the setting accepts.
public enum VideoSourceSetting: Sendable, Equatable {
    case test, none
    case y4m(path: String)
    case camera(device: String)

    public init?(parsing t: String) {
        guard t.utf8.count <= SettingKey.maxPathBytes else { return nil }
        if t == "test" { self = .test } else if t == "none" { self = .none }
        else if t.hasPrefix("y4m:"), t.count > 4 { self = .y4m(path: String(t.dropFirst(4))) }
        else {
            let device = t.hasPrefix("v4l2:") ? String(t.dropFirst(5)) : t
            guard device.hasPrefix("/dev/"), !device.hasSuffix("/") else { return nil }
            self = .camera(device: device)
        }
    }
}

/// An `audio` value: the one parser of what the setting accepts.
public enum AudioSourceSetting: Sendable, Equatable {
    case test, none
    case wav(path: String)
    case alsa(device: String)

    public init?(parsing t: String) {
        guard t.utf8.count <= SettingKey.maxPathBytes else { return nil }
        if t == "test" { self = .test } else if t == "none" { self = .none }
        else if t.hasPrefix("wav:"), t.count > 4 { self = .wav(path: String(t.dropFirst(4))) }
        else if t.hasPrefix("alsa:"), t.count > 5 { self = .alsa(device: String(t.dropFirst(5))) }
        else { return nil }
    }
}

private extension String {
    func leftPadded(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}

/// Where a setting's value came from, for error messages and `--check-config`.
public enum SettingOrigin: Sendable, Equatable, CustomStringConvertible {
    case defaultValue
    case file(path: String, line: Int?)
    case environment(String)
    case flag(String)

    public var description: String {
        switch self {
        case .defaultValue: return "default"
        case let .file(path, line): return line.map { "\(path):\($0)" } ?? path
        case let .environment(v): return "environment \(v)"
        case let .flag(f): return "flag \(f)"
        }
    }
}

/// A bad configuration: names the file and line (or variable, or flag), the key, and the fix.
public struct ConfigError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ d: String) { description = d }
    static func at(_ origin: SettingOrigin, key: String, _ what: String) -> ConfigError {
        switch origin {
        case .flag(let f): return ConfigError("invalid \(f): \(what)")
        case .environment(let v): return ConfigError("invalid environment variable \(v) (key '\(key)'): \(what)")
        default: return ConfigError("\(origin): key '\(key)': \(what)")
        }
    }
}

/// The merged settings: every key has a value and an origin.
public struct DaemonSettings: Sendable {
    public private(set) var values: [SettingKey: SettingValue] = [:]
    public private(set) var origins: [SettingKey: SettingOrigin] = [:]
    /// The config file read, if any.
    public var filePath: String?
    /// Things that are not errors but probably mistakes (a REEL_ variable close to a setting's name).
    public private(set) var warnings: [String] = []
    /// `[camera.controls]`: set at every open of a V4L2 camera, in file order. Only the form
    /// of each name and the type of each value are checked here; the camera checks the rest
    /// when it is opened (`start` fails naming the line).
    public private(set) var cameraControls: [CameraControlAssignment] = []

    public static let defaultConfigPath = "/etc/reel/reeld.toml"

    /// For a one-shot `reeld record`: the daemon's settings it was given that it does not use
    /// (`SettingSpec.serveOnly`). `errors` for flags (the caller asked for what will not happen),
    /// `warnings` for the environment (it may be set for the daemon as well); the config file,
    /// shared with the daemon, says nothing.
    public var serveOnlyProblems: (errors: [String], warnings: [String]) {
        var errors: [String] = [], warnings: [String] = []
        for key in SettingKey.allCases where key.spec.serveOnly {
            switch origins[key] {
            case .flag?:
                errors.append("\(key.flag) is a setting of the daemon ('reeld serve'); 'reeld record' does not use it: remove it")
            case let .environment(name)?:
                warnings.append("environment variable \(name) is a setting of the daemon ('reeld serve'); 'reeld record' ignores it")
            default: break
            }
        }
        return (errors, warnings)
    }

    public init() {
        for k in SettingKey.allCases { values[k] = k.defaultValue; origins[k] = .defaultValue }
    }

    /// Layers file, environment and flags over the defaults. `configPath` nil means
    /// $REEL_CONFIG, else /etc/reel/reeld.toml if it exists (an explicit path must exist).
    public static func resolve(configPath: String?, environment: [String: String],
                               flags: [SettingKey: SettingValue]) throws(ConfigError) -> DaemonSettings {
        var s = DaemonSettings()
        var path = configPath
        var explicit = configPath != nil
        if path == nil, let e = environment["REEL_CONFIG"], !e.isEmpty { path = e; explicit = true }
        if path == nil, FileManager.default.fileExists(atPath: defaultConfigPath) { path = defaultConfigPath }
        if let path {
            if !explicit && !FileManager.default.isReadableFile(atPath: path) {
                throw ConfigError("cannot read \(path): permission denied (make it readable by reeld, or pass --config)")
            }
            try s.apply(file: path)
        }
        for k in SettingKey.allCases {
            if let raw = environment[k.environmentVariable] {
                try s.set(k, try parse(raw, for: k, origin: .environment(k.environmentVariable)), origin: .environment(k.environmentVariable))
            }
        }
        for (k, v) in flags { try s.set(k, v, origin: .flag(k.flag)) }
        if !s.cameraControls.isEmpty, case .camera = s.videoSource {} else if !s.cameraControls.isEmpty {
            s.warnings.append("[camera.controls] in \(s.filePath ?? "the config file") is ignored: the video source is \(show(s.string(.video))), not a V4L2 camera")
        }
        let known = Set(SettingKey.allCases.map(\.environmentVariable) + ["REEL_CONFIG"])
        for name in environment.keys.sorted() where name.hasPrefix("REEL_") && !known.contains(name) && !name.hasPrefix("REEL_TEST_") {
            if let near = closest(to: String(name.dropFirst(5))) {
                s.warnings.append("environment variable \(show(name, quoted: false)) is not a reeld setting and is ignored (did you mean \(SettingKey(rawValue: near)!.environmentVariable)?)")
            }
        }
        return s
    }

    /// A flag or environment string as a typed value of `key`.
    public static func parse(_ raw: String, for key: SettingKey, origin: SettingOrigin) throws(ConfigError) -> SettingValue {
        switch key.kind {
        case .string, .stringOrInt: return .string(raw)
        case .strings: return .strings(raw.isEmpty ? [] : [raw])
        case .bool:
            switch raw.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true", "yes", "on", "1": return .bool(true)
            case "false", "no", "off", "0": return .bool(false)
            default: throw ConfigError.at(origin, key: key.rawValue, "'\(raw)' is not true or false")
            }
        case .int:
            guard let i = Int(raw.trimmingCharacters(in: .whitespaces)) else {
                throw ConfigError.at(origin, key: key.rawValue, "'\(raw)' is not an integer")
            }
            return .int(i)
        }
    }

    mutating func set(_ k: SettingKey, _ v: SettingValue, origin: SettingOrigin) throws(ConfigError) {
        if let p = k.problem(v) { throw ConfigError.at(origin, key: k.rawValue, p) }
        values[k] = v
        origins[k] = origin
    }

    mutating func apply(file path: String) throws(ConfigError) {
        let data: Data
        do {
            let h = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? h.close() }
            data = try h.readToEnd() ?? Data()
        } catch {
            let why = access(path, F_OK) != 0 ? "no such file" : access(path, R_OK) != 0 ? "permission denied" : "\(error.localizedDescription)"
            throw ConfigError("cannot read config file \(path): \(why) (check the path and its permissions, or pass --config)")
        }
        try apply(data: data, path: path)
    }

    /// Layers the contents of a config file (named `path` in messages) over these settings
    /// (public for the fuzzer, `make fuzz`).
    public mutating func apply(data: Data, path: String) throws(ConfigError) {
        let text = try Self.checkedText(data, path: path)
        filePath = path
        let lines = Self.lines(text)
        let table: TOMLDocument
        do { table = try TOMLDocument(parsing: text) }
        catch {
            let n = error.line
            let key = (1...lines.count).contains(n) ? Self.keyWritten(on: lines[n - 1]).map { "key '\(Self.show($0, quoted: false))': " } ?? "" : ""
            throw ConfigError("\(path):\(n): \(key)\(Self.show(error.description, max: 200, quoted: false)) (fix the TOML syntax; see the comments in the installed reeld.toml)")
        }
        // Checked in the order they are written, so the first mistake in the file is the one named.
        let keys = table.keys.map { ($0, table.line(of: $0)) }.sorted { ($0.1 ?? Int.max, $0.0) < ($1.1 ?? Int.max, $1.0) }
        for (key, line) in keys {
            let origin = SettingOrigin.file(path: path, line: line)
            let value = table[key]!
            if key == Self.cameraTable {
                try applyCamera(table, origin: origin, path: path)
                continue
            }
            guard let k = SettingKey(rawValue: key) else {
                // A known key under a [table] header: reeld.toml has no tables.
                if value.type == .table, let inner = value.tableKeys.sorted().first(where: { SettingKey(rawValue: $0) != nil }) {
                    throw ConfigError("\(origin): key '\(Self.show(key, quoted: false))': reeld.toml has no tables, so '\(inner)' under [\(Self.show(key, quoted: false))] is not read (move the settings above the first [table] line and remove the header)")
                }
                let hint = Self.closest(to: key).map { " (did you mean '\($0)'?)" } ?? ""
                throw ConfigError("\(origin): key '\(Self.show(key, quoted: false))': unknown key\(hint); the keys are documented in \(Self.defaultConfigPath)")
            }
            let v: SettingValue
            switch (k.kind, value.type) {
            case (.string, .string), (.stringOrInt, .string): v = .string(value.string!)
            case (.int, .int), (.stringOrInt, .int): v = k.kind == .int ? .int(value.int!) : .string(String(value.int!))
            case (.bool, .bool): v = .bool(value.bool!)
            case (.strings, .array):
                var items: [String] = []
                for item in value.array! {
                    guard let s = item.string else { throw ConfigError.at(origin, key: key, "expected an array of strings, found an array holding \(Self.typeName(item.type))") }
                    items.append(s)
                }
                v = .strings(items)
            default:
                let want: String
                switch k.kind {
                case .string: want = "a string (in quotes)"
                case .int: want = "an integer (no quotes)"
                case .stringOrInt: want = k == .maxDuration ? "an integer or a string (seconds with decimals go in quotes: \"2.5\")" : "an integer or a string"
                case .strings: want = "an array of strings"
                case .bool: want = "true or false (no quotes)"
                }
                var hint = ""
                if k == .fps, value.type == .double { hint = " (write a fractional rate as a string, e.g. \"30000/1001\" for 29.97)" }
                if k.kind == .int, value.type == .double { hint = " (write a whole number, e.g. \(Int(exactly: (value.double ?? 0).rounded()) ?? 0))" }
                if k.kind == .strings, value.type == .string { hint = " (write [\"/path/to/program\", \"arg\"], or [] for none)" }
                throw ConfigError.at(origin, key: key, "expected \(want), found \(Self.typeName(value.type))\(hint)")
            }
            try set(k, v, origin: origin)
        }
    }

    static let cameraTable = "camera"

    /// `[camera.controls]`: one `NAME = VALUE` per control, NAME as v4l2-ctl spells it, VALUE an
    /// integer, true/false or a string (a menu entry's name). Nothing else may be under `camera`.
    mutating func applyCamera(_ table: TOMLDocument, origin: SettingOrigin, path: String) throws(ConfigError) {
        let fix = "write camera controls under a [camera.controls] header, one NAME = VALUE per line, e.g. brightness = 140"
        guard table.isOpenTable(Self.cameraTable) else {
            let found = table[Self.cameraTable].map { Self.typeName($0.type) } ?? "nothing"
            throw ConfigError.at(origin, key: Self.cameraTable, "expected a [camera.controls] table, found \(found) (\(fix))")
        }
        var seen: [String: Int] = [:]
        var found: [CameraControlAssignment] = []
        for e in table.tableEntries where e.table.first == Self.cameraTable {
            let full = e.table + e.key
            let at = SettingOrigin.file(path: path, line: e.line)
            let shown = full.joined(separator: ".")
            guard full.count == 3, full[1] == "controls" else {
                throw ConfigError.at(at, key: Self.show(shown, quoted: false), "not read: under [camera] only [camera.controls] is (\(fix))")
            }
            let name = full[2]
            let key = "camera.controls.\(Self.show(name, quoted: false))"
            guard CameraControls.isWellFormedName(name) else {
                let want = CameraControls.name(name)
                let hint = want.isEmpty ? "" : " (did you mean '\(want)'?)"
                throw ConfigError.at(at, key: key, "\(Self.show(name)) is not a control name as 'reelctl controls' (and v4l2-ctl) spell them: lowercase letters, digits and single '_'\(hint)")
            }
            if let first = seen[name] {
                throw ConfigError.at(at, key: key, "set twice, first on line \(first) (keep one)")
            }
            seen[name] = e.line
            let input: CameraControlInput
            switch e.value.type {
            case .int: input = .int(Int64(e.value.int!))
            case .bool: input = .bool(e.value.bool!)
            case .string:
                let t = e.value.string!
                if t.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
                    throw ConfigError.at(at, key: key, "\(Self.show(t)) contains a control character (remove it)")
                }
                input = .text(t)
            default:
                var hint = ""
                if e.value.type == .double { hint = " (controls take whole numbers, e.g. \(Int(exactly: (e.value.double ?? 0).rounded()) ?? 0))" }
                throw ConfigError.at(at, key: key, "expected an integer, true/false or a string (a menu entry), found \(Self.typeName(e.value.type))\(hint)")
            }
            found.append(CameraControlAssignment(name: name, input: input, origin: "\(at): [camera.controls] \(name)"))
        }
        cameraControls = found
    }

    /// The file as text, or an error naming the line of the first byte that cannot be in a config
    /// file: invalid UTF-8, a NUL (a config file is text), or a \u0000 escape (a path or a name
    /// would end there). Then the lines `hazard` and `bracketHazard` refuse.
    static func checkedText(_ data: Data, path: String) throws(ConfigError) -> String {
        let bytes = [UInt8](data)
        func lineAt(_ offset: Int) -> Int { bytes[..<offset].reduce(1) { $1 == 0x0A ? $0 + 1 : $0 } }
        var parser = Unicode.UTF8.ForwardParser()
        var it = bytes.makeIterator()
        var offset = 0
        decoding: while true {
            switch parser.parseScalar(from: &it) {
            case let .valid(encoded): offset += encoded.count
            case .emptyInput: break decoding
            case .error:
                throw ConfigError("\(path):\(lineAt(offset)): byte 0x\(String(bytes[offset], radix: 16, uppercase: true)) is not UTF-8 text (save the file as UTF-8)")
            }
        }
        if let nul = bytes.firstIndex(of: 0) {
            throw ConfigError("\(path):\(lineAt(nul)): a NUL byte: a config file is text (is this a binary file?)")
        }
        let text = String(decoding: bytes, as: UTF8.self)
        for (i, line) in lines(text).enumerated() {
            let l = line.lowercased()
            if l.contains("\\u0000") || l.contains("\\u00000000") {
                throw ConfigError("\(path):\(i + 1): a \\u0000 escape: a NUL cannot be in a setting (remove it)")
            }
            if let why = hazard(line) { throw ConfigError("\(path):\(i + 1): \(why)") }
        }
        if let (line, why) = bracketHazard(text) { throw ConfigError("\(path):\(line): \(why)") }
        return text
    }

    /// A '}' where an array expects a value (`[}`, `[1, }`), on which toml++ 3 (TOMLKit, reeld's
    /// parser before TOMLDocument) aborted the process. TOMLDocument refuses it as well; this
    /// names the mismatch plainly. It follows the brackets of values through strings and comments
    /// and refuses a closing bracket that does not match the innermost open one (always a syntax
    /// error). Returns the line and why.
    static func bracketHazard(_ text: String) -> (Int, String)? {
        let s = Array(text.unicodeScalars)
        var stack: [Unicode.Scalar] = []
        var line = 1
        var i = 0
        var lineStart = true
        func starts(_ p: String, at k: Int) -> Bool {
            let q = Array(p.unicodeScalars)
            return k + q.count <= s.count && Array(s[k..<(k + q.count)]) == q
        }
        while i < s.count {
            let c = s[i]
            if c == "\n" { line += 1; lineStart = true; i += 1; continue }
            if c == " " || c == "\t" || c == "\r" { i += 1; continue }
            let atLineStart = lineStart
            lineStart = false
            if c == "#" {
                while i < s.count && s[i] != "\n" { i += 1 }
                continue
            }
            if atLineStart && stack.isEmpty && c == "[" {
                // A table header: skip its line (hazard() checked how it starts).
                while i < s.count && s[i] != "\n" && s[i] != "#" { i += 1 }
                continue
            }
            if c == "\"" || c == "'" {
                let multi = starts(c == "\"" ? "\"\"\"" : "'''", at: i)
                let delim = String(repeating: String(c), count: multi ? 3 : 1)
                i += delim.count
                while i < s.count {
                    if c == "\"" && s[i] == "\\" { i += 2; continue }
                    if s[i] == "\n" {
                        if !multi { break }  // an unterminated string: the parser says so
                        line += 1
                    }
                    if starts(delim, at: i) { i += delim.count; break }
                    i += 1
                }
                continue
            }
            switch c {
            case "[", "{": stack.append(c)
            case "]", "}":
                if let open = stack.last {
                    if (open == "[") != (c == "]") {
                        return (line, "'\(c)' closes the '\(open)' opened before it; brackets must pair up, [ with ] and { with }")
                    }
                    stack.removeLast()
                }
            default: break
            }
            i += 1
        }
        return nil
    }

    /// Lines that crashed toml++ 3 (TOMLKit, reeld's parser before TOMLDocument): a table header
    /// whose name starts with anything but a key character or a quote (`[[[`, `[=`, `[é]`, `[`
    /// alone on its line) tripped an assertion, and a key dotted hundreds of thousands of levels
    /// deep overflowed the stack. TOMLDocument refuses the first and reads the second without
    /// recursion; these say plainly that reeld.toml has no tables and no dotted keys.
    static func hazard(_ line: Substring) -> String? {
        let t = line.drop { $0 == " " || $0 == "\t" }
        if t.first == "[" {
            var rest = t.dropFirst()
            let double = rest.first == "["
            if double { rest = rest.dropFirst() }
            let spaced = rest.first == " " || rest.first == "\t"
            rest = rest.drop { $0 == " " || $0 == "\t" }
            let c = rest.unicodeScalars.first
            let fine = c.map {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "_-\"']".unicodeScalars.contains($0)
                    || ($0 == "[" && !double && spaced)
            } ?? false
            if !fine {
                return "\(show(String(t.prefix(8)))) does not start a table header ([name]); reeld.toml has no tables (remove the line)"
            }
        }
        // Dots outside quoted strings: a dotted key's depth (floats and dates have one or none).
        var dots = 0
        var quote: Character? = nil
        var escaped = false
        for ch in line {
            if let q = quote {
                if escaped { escaped = false } else if ch == "\\" && q == "\"" { escaped = true } else if ch == q { quote = nil }
            } else if ch == "\"" || ch == "'" { quote = ch }
            else if ch == "#" { break }
            else if ch == "." { dots += 1 }
        }
        if dots > 64 { return "a key nested \(dots) levels deep; reeld.toml's keys are plain names, e.g. crf = 20" }
        return nil
    }

    /// The lines of a file, LF or CRLF ("\r\n" is one Character in Swift, so splitting on "\n" alone
    /// would leave a CRLF file as one line).
    static func lines(_ text: String) -> [Substring] {
        text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
    }

    /// "a string", "an integer", "a boolean", ... for messages.
    static func typeName(_ t: TOMLDocument.ValueType) -> String {
        switch t {
        case .int: return "an integer"
        case .array: return "an array"
        case .table: return "a table"
        case .bool: return "a boolean"
        case .double: return "a floating-point number"
        case .dateTime: return "a date-time"
        case .string, .date, .time: return "a \(t.rawValue)"
        }
    }

    /// A value or key as messages show it: quoted, control characters escaped, cut to `max`
    /// characters (a 1 MB value must not make a 1 MB message).
    static func show(_ s: String, max: Int = 64, quoted: Bool = true) -> String {
        var out = ""
        var n = 0
        for c in s.unicodeScalars {
            if n == max { out += "... (\(s.unicodeScalars.count) characters)"; break }
            if c.value < 0x20 || c.value == 0x7f { out += c.escaped(asASCII: true) } else { out.unicodeScalars.append(c) }
            n += 1
        }
        return quoted ? "'\(out)'" : out
    }

    /// The top-level key a `key = value` line sets (the first part of a dotted key), for naming it
    /// in a syntax error on that line; nil for other lines.
    static func keyWritten(on line: Substring) -> String? {
        guard let eq = line.firstIndex(of: "=") else { return nil }
        let left = line[..<eq].trimmingCharacters(in: .whitespaces)
        if let q = left.first, q == "\"" || q == "'" {
            let rest = left.dropFirst()
            return rest.firstIndex(of: q).map { String(rest[..<$0]) }
        }
        let first = left.split(separator: ".", omittingEmptySubsequences: false).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        let bare = !first.isEmpty && first.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-"
        }
        return bare ? first : nil
    }

    /// The known key a mistyped one most likely meant: the same after lower-casing, '-' for '_'
    /// and dropping a REEL_ or -- prefix; else one within a small edit distance; else one
    /// sharing its first four characters.
    public static func closest(to key: String) -> String? {
        var norm = key.lowercased().replacingOccurrences(of: "-", with: "_")
        for prefix in ["reel_", "__"] where norm.hasPrefix(prefix) { norm = String(norm.dropFirst(prefix.count)) }
        if SettingKey(rawValue: norm) != nil { return norm }
        guard norm.count <= 64 else { return nil }
        let names = SettingKey.allCases.map(\.rawValue)
        let scored = names.map { ($0, editDistance(norm, $0)) }.min { $0.1 < $1.1 }
        if let (name, d) = scored, d <= max(1, min(norm.count, name.count) / 3) { return name }
        guard norm.count >= 4 else { return nil }
        return names.first { $0.hasPrefix(norm.prefix(4)) }
    }

    /// Levenshtein distance, for did-you-mean.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars), b = Array(b.unicodeScalars)
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var prev = row[0]
            row[0] = i
            for j in 1...max(1, b.count) where !b.isEmpty {
                let cur = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1))
                prev = cur
            }
        }
        return a.isEmpty ? b.count : row[b.count]
    }

    // MARK: typed access

    public func string(_ k: SettingKey) -> String {
        switch values[k]! {
        case let .string(s): return s
        case let .int(i): return String(i)
        case let .strings(a): return a.joined(separator: " ")
        case let .bool(b): return String(b)
        }
    }
    public func bool(_ k: SettingKey) -> Bool { if case let .bool(b) = values[k]! { return b }; return false }
    public func int(_ k: SettingKey) -> Int { if case let .int(i) = values[k]! { return i }; return Int(string(k)) ?? 0 }
    public func strings(_ k: SettingKey) -> [String] { if case let .strings(a) = values[k]! { return a }; return [string(k)] }
    /// nil for an empty string.
    public func optionalString(_ k: SettingKey) -> String? { let s = string(k); return s.isEmpty ? nil : s }

    // Values parsed by the parsers that checked them (`set` refuses what they refuse, and
    // SettingTableTests checks every default), so these cannot fail.
    public var videoSize: (width: Int, height: Int) { SettingKey.videoSize(string(.size))! }
    public var frameRate: Rational { SettingKey.frameRate(string(.fps))! }
    public var pixelFormat: CameraPixelFormat { CameraPixelFormat(name: string(.pixelFormat))! }
    public var videoSource: VideoSourceSetting { VideoSourceSetting(parsing: string(.video))! }
    public var audioSource: AudioSourceSetting { AudioSourceSetting(parsing: string(.audio))! }
    public var fsyncPolicy: FsyncPolicy { FsyncPolicy(rawValue: string(.fsync))! }
    /// The length cap in ns, nil for none (0).
    public var maxDuration: Nanos? { LengthCap.parse(string(.maxDuration)).flatMap { $0 == 0 ? nil : $0 } }

    /// One line per key: `key = value  # origin`, for `reeld --check-config`.
    public var report: String {
        var lines = SettingKey.allCases.map { "\($0.rawValue) = \(values[$0]!)  # \(origins[$0]!)" }
        if !cameraControls.isEmpty {
            lines.append("[camera.controls]")
            for c in cameraControls {
                let v: String
                if case let .text(t) = c.input { v = "\"\(t)\"" } else { v = c.input.description }
                lines.append("\(c.name) = \(v)  # \(c.origin.components(separatedBy: ": [camera").first ?? c.origin)")
            }
        }
        return lines.joined(separator: "\n")
    }
}
