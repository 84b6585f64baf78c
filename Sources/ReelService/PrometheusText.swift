import Foundation
import Glibc
import Logging
import ReelControl
import ReelCore
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

    public static func render(_ st: StatusInfo, errors: [ErrorKind: Int], syncLatencyNs: Nanos?) -> String {
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
        metric("reel_errors_total", "counter", "Errors since reeld started, by kind.",
               ErrorKind.allCases.map { ("{kind=\"\($0.rawValue)\"}", String(errors[$0] ?? 0)) })
        metric("reel_uptime_seconds", "gauge", "Seconds since reeld started.", [("", seconds(st.uptimeNs))])
        let labels = buildLabels.map { "\($0.0)=\"\($0.1)\"" }.joined(separator: ",")
        metric("reel_build_info", "gauge", "reeld's build: always 1, its labels name the build.", [("{\(labels)}", "1")])
        return out
    }
}
