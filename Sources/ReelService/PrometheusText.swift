import Foundation
import Glibc
import Logging
import ReelControl
import ReelCore
import ReelStorage
import ReelSystem
import Synchronization

/// reeld's state in the Prometheus text exposition format (version 0.0.4), for
/// node_exporter's textfile collector.
public enum PrometheusText {
    public static let buildLabels: [(String, String)] = {
        #if compiler(>=6.2)
        let swift = "6.2"
        #elseif compiler(>=6.1)
        let swift = "6.1"
        #else
        let swift = "6.0"
        #endif
        return [("protocol_version", String(protocolVersion)), ("swift", swift)]
    }()

    /// `outbox`: with `outbox_dir`, its census (nil: it could not be read) and the wall-clock
    /// instant it was taken at; nil without an outbox (its metrics are left out).
    public static func render(_ st: StatusInfo, errors: [ErrorKind: Int], syncLatencyNs: Nanos?,
                              outbox: (census: OutboxCensus?, wallClockNs: Nanos)? = nil) -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for s in samples { out += "\(name)\(s.labels) \(s.value)\n" }
        }
        func seconds(_ ns: Nanos) -> String { String(format: "%.6f", Double(ns) / 1e9) }
        metric("reel_state", "gauge", "reeld's recorder state: 1 for the current one, 0 for the others.",
               RecorderState.allCases.map { ("{state=\"\($0.rawValue)\"}", $0 == st.state ? "1" : "0") })
        metric("reel_recorded_seconds", "gauge", "Media recorded in the current recording, pauses left out (0 when idle).",
               [("", seconds(st.recordedNs))])
        metric("reel_frames", "gauge", "Video frames written in the current recording.", [("", String(st.frames))])
        metric("reel_dropped_frames", "gauge", "Video frames lost in the current recording (camera, full queue or pool).",
               [("", String(st.droppedFrames))])
        metric("reel_audio_filled_samples", "gauge", "Audio samples filled with silence in the current recording (overruns, gaps).",
               [("", String(st.audioFilledSamples))])
        metric("reel_bytes_written", "gauge", "Bytes of the current recording's MP4 written so far.", [("", String(st.bytesWritten ?? 0))])
        if let free = st.freeBytes {
            metric("reel_free_bytes", "gauge", "Free bytes in the output directory's file system.", [("", String(free))])
        }
        if let ns = syncLatencyNs {
            metric("reel_fragment_sync_seconds", "gauge", "How long the last fragment's sync to disk (fdatasync) took.", [("", seconds(ns))])
        }
        if let (census, now) = outbox, let c = census {
            let capped = c.complete ? "" : " (the first \(Outbox.censusLimit) entries read)"
            metric("reel_outbox_files", "gauge", "Finished recordings waiting for upload in outbox_dir\(capped).", [("", String(c.files))])
            metric("reel_outbox_bytes", "gauge", "Bytes of the recordings waiting for upload in outbox_dir\(capped).", [("", String(c.bytes))])
            metric("reel_outbox_oldest_age_seconds", "gauge", "Seconds since the oldest recording waiting in outbox_dir was finished (0 when none waits).",
                   [("", String(c.oldestAgeSeconds(nowNs: now)))])
        }
        metric("reel_errors_total", "counter", "Errors since reeld started, by kind.",
               ErrorKind.allCases.map { ("{kind=\"\($0.rawValue)\"}", String(errors[$0] ?? 0)) })
        metric("reel_uptime_seconds", "gauge", "Seconds since reeld started.", [("", seconds(st.uptimeNs))])
        let labels = buildLabels.map { "\($0.0)=\"\($0.1)\"" }.joined(separator: ",")
        metric("reel_build_info", "gauge", "reeld's build: always 1, its labels name the build.", [("{\(labels)}", "1")])
        return out
    }
}
