import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ReelCore
import ReelSystem

/// The long responses: the event stream, the preview and recording downloads.
extension WebApp {
    /// GET /api/events: `event: status` now, then whatever the hub sends, until the browser leaves.
    func eventStream() -> Response {
        var h = Self.baseHeaders("text/event-stream")
        h[HTTPField.Name("X-Accel-Buffering")!] = "no"  // a proxy in front must not hold the stream back
        let events = events, link = link
        return Response(status: .ok, headers: h, body: .init { writer in
            let (id, stream, down) = events.listen()
            defer { events.leave(id) }
            try await writer.write(ByteBuffer(string: "retry: 2000\n\n"))
            if let down {
                try await writer.write(ByteBuffer(string: SSE.down(down)))
            } else {
                switch await link.status() {
                case let .success(json): try await writer.write(ByteBuffer(string: SSE.message(event: "status", data: json)))
                case let .failure(why): try await writer.write(ByteBuffer(string: SSE.down(why.message)))
                }
            }
            for await message in stream {
                try await writer.write(ByteBuffer(string: message))
            }
            try await writer.finish(nil)
        })
    }

    /// The preview sizes a browser may ask for (reeld checks them against the camera and its settings).
    static let previewWidths = 16...4096
    static let previewFps = 1...60

    /// GET /preview.mjpg?width=640&fps=10: the newest frame of reeld's preview, as MJPEG.
    func preview(_ request: WebRequest) -> Response {
        let query = request.uri.queryParameters
        let width = query["width"].map { Int(String($0)) } ?? 640
        let fps = query["fps"].map { Int(String($0)) } ?? 10
        guard let width, let fps, Self.previewWidths.contains(width), Self.previewFps.contains(fps) else {
            return Self.json(400, CommandOutcome.refusal(.badRequest("width must be \(Self.previewWidths) and fps \(Self.previewFps) (reeld narrows both to its camera and settings)")))
        }
        guard let watched = previews.watch(.init(width: width, fps: fps)) else {
            return Self.json(503, CommandOutcome.refusal(.busy("\(PreviewHub.maxFeeds) preview sizes are being watched already: use one of theirs")))
        }
        var h = Self.baseHeaders("multipart/x-mixed-replace; boundary=\(PreviewHub.boundary)")
        h[HTTPField.Name("X-Accel-Buffering")!] = "no"
        return Response(status: .ok, headers: h, body: .init { writer in
            defer { watched.leave() }
            for await item in watched.stream {
                guard case let .part(bytes) = item else { break }
                try await writer.write(ByteBuffer(bytes: bytes))
            }
            try await writer.finish(nil)
        })
    }

    /// Bytes read from a recording per step.
    static let downloadChunk = 256 * 1024

    /// GET /recordings/<name>: the file, whole (200) or one range of it (206).
    func recording(_ raw: String, _ request: WebRequest) async -> Response {
        let notFound = Self.json(404, CommandOutcome.refusal(.badRequest("no such recording")))
        guard let name = raw.removingPercentEncoding, RecordingsDirectory.isRecordingName(name) else { return notFound }
        let opened: OpenRecording?
        do {
            opened = try await pool.run { [recordings] in try recordings.open(name) }
        } catch {
            logger.error("cannot open recording \(name) in \(settings.recordingsDir): \(error)")
            return Self.json(500, CommandOutcome.refusal(.failed("cannot open \(name): \(error)")))
        }
        guard let file = opened else { return notFound }
        var h = Self.baseHeaders("video/mp4", cache: "no-cache")
        h[.acceptRanges] = "bytes"
        h[.contentDisposition] = "inline; filename=\"\(name.replacingOccurrences(of: "\"", with: "_"))\""
        let first: Int64, last: Int64
        var status = HTTPResponse.Status.ok
        switch ByteRange.parse(request.headers[.range], size: file.size) {
        case .whole:
            (first, last) = (0, file.size - 1)
        case let .part(a, b):
            (first, last) = (a, b)
            status = .partialContent
            h[.contentRange] = "bytes \(a)-\(b)/\(file.size)"
        case .unsatisfiable:
            h[.contentRange] = "bytes */\(file.size)"
            h[.contentLength] = "0"
            return Response(status: .rangeNotSatisfiable, headers: h)
        }
        let length = max(0, last - first + 1)
        h[.contentLength] = String(length)
        if request.method == .head { return Response(status: status, headers: h) }
        let pool = pool
        return Response(status: status, headers: h, body: .init(contentLength: Int(length)) { writer in
            var offset = first
            while offset <= last {
                let count = Int(min(Int64(Self.downloadChunk), last - offset + 1))
                let at = offset
                let bytes = try await pool.run { try file.read(at: at, count: count) }
                guard !bytes.isEmpty else { break }  // the file shrank: end early, the client sees a short body
                try await writer.write(ByteBuffer(bytes: bytes))
                offset += Int64(bytes.count)
            }
            try await writer.finish(nil)
        })
    }

    /// Ends every event and preview stream (graceful shutdown: the server then finishes its responses).
    public func endStreams() {
        events.endAll()
        previews.endAll()
    }
}
