import Foundation
import ReelControl
import ReelCore

/// The human-readable form of a status, as `reelctl status` prints it.
enum StatusText {
    /// `ns` as seconds with milliseconds, e.g. "2.000 s" (integer arithmetic, truncating to ms).
    static func seconds(_ ns: Nanos) -> String {
        let sign = ns < 0 ? "-" : ""
        let magnitude = ns.magnitude
        let ms = magnitude / 1_000_000
        let frac = String(ms % 1000)
        return "\(sign)\(ms / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac) s"
    }

    /// A few aligned lines, each ending in a newline.
    static func render(_ s: StatusInfo) -> String {
        var rows: [(String, String)] = [
            ("state", s.state.rawValue),
            ("file", s.file ?? "-"),
            ("segments", "\(s.segments.count)"),
        ]
        for segment in s.segments {
            rows.append(("  #\(segment.index)", seconds(segment.durationNs)))
        }
        rows += [
            ("recorded", seconds(s.recordedNs)),
            ("frames", "\(s.frames)"),
            ("dropped frames", "\(s.droppedFrames)"),
            ("audio samples", "\(s.audioSamples)"),
        ]
        if let lastFile = s.lastFile { rows.append(("last file", lastFile)) }
        if let lastError = s.lastError { rows.append(("last error", lastError)) }
        rows += [
            ("video", s.video),
            ("audio", s.audio),
            ("uptime", seconds(s.uptimeNs)),
        ]
        let width = rows.map { $0.0.count }.max() ?? 0
        return rows.map { label, value in
            label + ":" + String(repeating: " ", count: width - label.count + 1) + value + "\n"
        }.joined()
    }
}
