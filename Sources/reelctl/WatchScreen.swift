import Foundation
import ReelControl
import ReelCore

/// The screen `reelctl status --watch` draws: one status, with rates from the previous one.
enum WatchScreen {
    /// A status and the client's CLOCK_MONOTONIC instant (ns) when its reply arrived.
    struct Sample: Sendable {
        var status: StatusInfo
        var at: Int64
        init(status: StatusInfo, at: Int64) {
            self.status = status
            self.at = at
        }
    }

    /// "12.3" for 12.34: one decimal of an integer ratio (no floating point), or nil when `den` is 0.
    static func tenths(_ num: Int64, _ den: Int64) -> String? {
        guard den > 0 else { return nil }
        let t = (num * 10 + den / 2) / den  // rounded tenths (num >= 0)
        return "\(t / 10).\(t % 10)"
    }

    /// Frames per second between two samples of the same recording, e.g. "30.0"; nil without one.
    static func fps(_ prev: Sample?, _ cur: Sample) -> String? {
        guard let prev, prev.status.file == cur.status.file, cur.status.file != nil,
              cur.status.frames >= prev.status.frames else { return nil }
        return tenths((cur.status.frames - prev.status.frames) * 1_000_000_000, cur.at - prev.at)
    }

    /// File growth between two samples in kbit/s, e.g. "1234.5"; nil without one.
    static func kbps(_ prev: Sample?, _ cur: Sample) -> String? {
        guard let prev, prev.status.file == cur.status.file, let b0 = prev.status.bytesWritten,
              let b1 = cur.status.bytesWritten, b1 >= b0 else { return nil }
        // bytes * 8 / 1000 per second = bytes * 8e6 / ns
        return tenths((b1 - b0) * 8_000_000, cur.at - prev.at)
    }

    /// "-6.0 dBFS" per channel, "silent" for digital silence.
    static func peaks(_ dbfs: [Double?]) -> String {
        guard !dbfs.isEmpty else { return "-" }
        return dbfs.enumerated().map { i, p in
            "ch\(i + 1) " + (p.map { String(format: "%.1f dBFS", $0) } ?? "silent")
        }.joined(separator: ", ")
    }

    /// "123.4 MB" (decimal megabytes, integer arithmetic).
    static func megabytes(_ bytes: Int64?) -> String {
        guard let bytes, bytes >= 0 else { return "-" }
        return "\(tenths(bytes, 1_000_000)!) MB"
    }

    static func render(_ prev: Sample?, _ cur: Sample) -> String {
        let s = cur.status
        var rows: [(String, String)] = [
            ("state", s.state.rawValue),
            ("file", s.file ?? "-"),
            ("elapsed", StatusText.seconds(s.recordedNs)),
            ("segments", "\(s.segments.count)"),
            ("frames", "\(s.frames)"),
            ("fps", fps(prev, cur) ?? "-"),
            ("dropped frames", "\(s.droppedFrames)"),
            ("audio peak", s.state == .idle ? "-" : peaks(s.audioPeakDbfs)),
            ("bitrate", kbps(prev, cur).map { "\($0) kbit/s" } ?? "-"),
            ("written", megabytes(s.bytesWritten)),
            ("free", megabytes(s.freeBytes)),
        ]
        if let lastError = s.lastError { rows.append(("last error", lastError)) }
        let width = rows.map { $0.0.count }.max() ?? 0
        return rows.map { label, value in
            label + ":" + String(repeating: " ", count: width - label.count + 1) + value + "\n"
        }.joined()
    }
}
