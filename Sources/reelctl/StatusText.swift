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

    /// `reelctl takes`: a header and one line per take (number, title, start, duration; "-" while open).
    static func takesTable(_ takes: [TakeInfo]) -> String {
        let rows = [("#", "title", "start", "duration")]
            + takes.map { ("\($0.number)", $0.title, seconds($0.startNs), $0.durationNs.map(seconds) ?? "-") }
        let w = (rows.map { $0.0.count }.max()!, rows.map { $0.1.count }.max()!, rows.map { $0.2.count }.max()!)
        func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: n - s.count) }
        return rows.map { "\(pad($0.0, w.0))  \(pad($0.1, w.1))  \(pad($0.2, w.2))  \($0.3)\n" }.joined()
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
        if !s.takes.isEmpty {
            rows.append(("takes", "\(s.takes.count)"))
            for t in s.takes {
                rows.append(("  \(t.number)", "\(t.title): from \(seconds(t.startNs)), \(t.durationNs.map(seconds) ?? "open")"))
            }
        }
        if let remaining = s.remainingNs { rows.append(("remaining", seconds(remaining))) }
        if let preRoll = s.preRollNs { rows.append(("pre-roll", "\(seconds(preRoll)) held (a start now records from that long before it)")) }
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
