import Foundation
import ReelCore
import ReelStorage

/// The checks the setting table (`SettingKey.spec`) names, and the parsers that share them:
/// each value is read once, by the parser that checks it, into the type its field holds.
extension SettingKey {
    /// x264's psychovisual tunes (at most one) and the two that combine with them.
    static let psyTunes = ["film", "animation", "grain", "stillimage", "psnr", "ssim"]
    static let speedTunes = ["fastdecode", "zerolatency"]
    /// The longest path the kernel takes (PATH_MAX includes the NUL) and the longest Unix socket path.
    static let maxPathBytes = Int(PATH_MAX) - 1
    static let maxSocketPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    static func show(_ t: String) -> String { DaemonSettings.show(t) }

    static func path(_ t: String, _ what: String, max: Int) -> String? {
        if t.isEmpty { return "must not be empty (give a \(what))" }
        if t.utf8.count > max { return "the \(what) is \(t.utf8.count) bytes; at most \(max) work (choose a shorter one)" }
        return nil
    }

    /// A user or group name as useradd/groupadd accept it; "" for none.
    static func accountName(_ t: String, _ what: String) -> String? {
        let ok = t.utf8.count <= 32 && t.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "_.-$".unicodeScalars.contains($0)
        } && !t.hasPrefix("-")
        return ok ? nil : "\(show(t)) is not a \(what) name (letters, digits, _ . -, at most 32; \"\" for none)"
    }

    /// "" (none) or an absolute path of a file.
    static func metricsPath(_ t: String) -> String? {
        if t.isEmpty { return nil }
        if !t.hasPrefix("/") || t.hasSuffix("/") { return "\(show(t)) is not an absolute path of a file (e.g. \"/var/lib/node_exporter/textfile_collector/reel.prom\"; \"\" for none)" }
        return path(t, "path", max: maxPathBytes - 4)  // and PATH.tmp
    }

    /// "" (none) or an absolute path of a directory.
    static func outboxPath(_ t: String) -> String? {
        if t.isEmpty { return nil }
        if !t.hasPrefix("/") { return "\(show(t)) is not an absolute path of a directory (e.g. \"/var/lib/reel/outbox\", on output_dir's file system; \"\" for none)" }
        return path(t, "directory", max: maxPathBytes - 256)  // and /NAME.mp4
    }

    static func tune(_ t: String) -> String? {
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

    static func badSource(_ which: String, _ t: String) -> String {
        which == "video"
            ? "unsupported --video \(show(t)) (use a camera such as /dev/video0 or v4l2:/dev/video0, 'y4m:PATH', 'test' or 'none'; see 'reeld --list-devices')"
            : "unsupported --audio \(show(t)) (use an ALSA device such as alsa:default or alsa:hw:1,0, 'wav:PATH', 'test' or 'none'; see 'reeld --list-devices')"
    }

    static func badPixelFormat(_ t: String) -> String {
        "\(show(t)) is not one of \((CameraPixelFormat.allCases.map(\.rawValue) + ["i420"]).joined(separator: ", "))"
    }

    static let widths = 16...7680, heights = 16...4320
    static var sizeText: String { "\(widths.lowerBound)x\(heights.lowerBound) to \(widths.upperBound)x\(heights.upperBound)" }
    static func badSize(_ t: String) -> String { "\(show(t)) is not WxH with even numbers from \(sizeText), e.g. \"640x360\"" }

    static let maxFps: Int64 = 240
    static var fpsText: String { "1 to \(maxFps)" }
    static func badFrameRate(_ t: String) -> String { "\(show(t)) is not N or N/D from \(fpsText), e.g. 30 or \"30000/1001\"" }

    /// An `fps` value as a rate; nil unless it is N or N/D from 1 to 240.
    static func frameRate(_ t: String) -> Rational? {
        // Bounds checked before multiplying, so no value can overflow.
        guard let r = Rational(parsing: t), r.den <= 1_000_000, r.num >= r.den, r.num <= maxFps * r.den else { return nil }
        return r
    }

    /// A `max_duration` value: the cap in ns, nil for none (0); nil inside nil when malformed.
    static func lengthCap(_ t: String) -> Nanos?? {
        LengthCap.parse(t).map { $0 == 0 ? nil : $0 }
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

/// A `size` value, WxH.
public struct VideoSize: Sendable, Hashable {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    /// nil unless `t` is WxH with even numbers in range (`SettingKey.widths`, `heights`).
    public init?(parsing t: String) {
        let p = t.split(separator: "x", omittingEmptySubsequences: false)
        guard p.count == 2, let w = Int(p[0]), let h = Int(p[1]), w % 2 == 0, h % 2 == 0,
              SettingKey.widths.contains(w), SettingKey.heights.contains(h) else { return nil }
        width = w
        height = h
    }
}

/// A `log_level` value: swift-log's levels, by the names it gives them.
public enum LogLevel: String, Sendable, CaseIterable {
    case trace, debug, info, notice, warning, error, critical
}
