import Foundation
import XCTest
import ReelCore
@testable import ReelMedia

/// Runs a command; returns exit status, stdout and stderr (both via temp files, so nothing can block).
func shell(_ args: [String]) throws -> (status: Int32, out: Data, err: String) {
    let dir = FileManager.default.temporaryDirectory
    let o = dir.appendingPathComponent("reel-\(UUID()).out"), e = dir.appendingPathComponent("reel-\(UUID()).err")
    _ = FileManager.default.createFile(atPath: o.path, contents: nil)
    _ = FileManager.default.createFile(atPath: e.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: o); try? FileManager.default.removeItem(at: e) }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = args
    p.standardOutput = try FileHandle(forWritingTo: o)
    p.standardError = try FileHandle(forWritingTo: e)
    try p.run()
    p.waitUntilExit()
    return (p.terminationStatus, try Data(contentsOf: o), String(decoding: try Data(contentsOf: e), as: UTF8.self))
}

/// ffprobe JSON for `entries` (e.g. "stream=codec_name,profile") of `file`.
func probe(_ file: String, _ extra: [String]) throws -> [String: Any] {
    let r = try shell(["ffprobe", "-v", "error", "-of", "json"] + extra + [file])
    guard r.status == 0 else { throw MediaError("ffprobe failed: \(r.err)") }
    return try JSONSerialization.jsonObject(with: r.out) as! [String: Any]
}

func tempPath(_ name: String) -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("reel-media-tests", isDirectory: true)
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir.appendingPathComponent("\(UUID().uuidString.prefix(8))-\(name)").path
}

/// What `writeTestFile` produced.
struct Written {
    var videoPackets: [(pts: Int64, dts: Int64, key: Bool)] = []
    var audioPackets: [(pts: Int64, dts: Int64, duration: Int64)] = []
    var dtsFixes = 0
}

/// Synthesises `seconds` of dark video with one white frame at exactly `markSecond`, and silence with a
/// 1 kHz tone from sample `markSecond * rate` on, feeding the encoders the way the pipeline does (audio
/// in 10 ms chunks interleaved with frames), and writes an MP4. `beforeFinish` runs before `finish()`.
@discardableResult
func writeTestFile(path: String, width: Int = 320, height: Int = 240, fps: Rational, h264: H264Settings = H264Settings(), firstFrame: Int64 = 0, rate: Int, channels: Int,
                   seconds: Int64, markSecond: Int64 = 1, afterFrame: (Int64, MP4Writer) throws -> Void = { _, _ in },
                   beforeFinish: (MP4Writer) throws -> Void = { _ in }) throws -> Written {
    let venc = try H264Encoder(width: width, height: height, fps: fps, settings: h264)
    let aenc = try AACEncoder(format: AudioFormat(sampleRate: rate, channels: channels), settings: AACSettings())
    let mp4 = try MP4Writer(path: path, video: venc, audio: aenc)
    var w = Written()

    let dark = [UInt8](repeating: 16, count: width * height), white = [UInt8](repeating: 235, count: width * height)
    let chroma = [UInt8](repeating: 128, count: width * height / 4)
    let frames = seconds * fps.num / fps.den
    let markFrame = markSecond * fps.num / fps.den
    let totalSamples = seconds * Int64(rate), onset = markSecond * Int64(rate)
    var sampleIndex: Int64 = 0
    let chunk = rate / 100
    var pcm = [Int16](repeating: 0, count: chunk * channels)

    func emitVideo(_ p: Packet) throws { w.videoPackets.append((p.pts, p.dts, p.isKeyframe)); try mp4.writeVideo(p) }
    func emitAudio(_ p: Packet) throws { w.audioPackets.append((p.pts, p.dts, p.duration)); try mp4.writeAudio(p) }

    for n in 0..<frames {
        // Audio up to the end of this frame.
        let audioEnd = min(totalSamples, rescale(n + 1, Int64(rate) * fps.den, fps.num))
        while sampleIndex < audioEnd {
            let count = Int(min(Int64(chunk), audioEnd - sampleIndex))
            for i in 0..<count {
                let k = sampleIndex + Int64(i)
                let v: Int16 = k >= onset ? Int16(16000 * sin(2 * Double.pi * 1000 * Double(k - onset) / Double(rate))) : 0
                for c in 0..<channels { pcm[i * channels + c] = v }
            }
            try pcm.withUnsafeBufferPointer { try aenc.encode(interleaved: UnsafeBufferPointer(rebasing: $0[0..<count * channels]), emitAudio) }
            sampleIndex += Int64(count)
        }
        let pts = rescale(n, 90_000 * fps.den, fps.num)
        if n < firstFrame { try afterFrame(n, mp4); continue }   // the camera started late
        try (n == markFrame ? white : dark).withUnsafeBufferPointer { y in
            try chroma.withUnsafeBufferPointer { c in
                let f = I420Frame(y: y.baseAddress!, u: c.baseAddress!, v: c.baseAddress!,
                                  strideY: width, strideU: width / 2, strideV: width / 2, width: width, height: height)
                try venc.encode(f, pts: pts, emitVideo)
            }
        }
        try afterFrame(n, mp4)
    }
    try venc.flush(emitVideo)
    try aenc.flush(emitAudio)
    try beforeFinish(mp4)
    try mp4.finish()
    w.dtsFixes = mp4.dtsFixes
    return w
}

/// The edit lists of an MP4: for each track (by handler type "vide"/"soun"), the media_time of each elst entry.
func editListMediaTimes(_ file: String) throws -> [String: [Int64]] {
    let d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
    func u32(_ o: Int) -> Int64 { Int64(d[o]) << 24 | Int64(d[o + 1]) << 16 | Int64(d[o + 2]) << 8 | Int64(d[o + 3]) }
    func boxes(_ start: Int, _ end: Int) -> [(type: String, body: Range<Int>)] {
        var r: [(String, Range<Int>)] = [], o = start
        while o + 8 <= end {
            let size = Int(u32(o)); guard size >= 8, o + size <= end else { break }
            r.append((String(decoding: d[o + 4..<o + 8], as: UTF8.self), o + 8..<o + size)); o += size
        }
        return r
    }
    var result: [String: [Int64]] = [:]
    guard let moov = boxes(0, d.count).first(where: { $0.type == "moov" }) else { return result }
    for trak in boxes(moov.body.lowerBound, moov.body.upperBound) where trak.type == "trak" {
        let kids = boxes(trak.body.lowerBound, trak.body.upperBound)
        guard let mdia = kids.first(where: { $0.type == "mdia" }),
              let hdlr = boxes(mdia.body.lowerBound, mdia.body.upperBound).first(where: { $0.type == "hdlr" }) else { continue }
        let handler = String(decoding: d[hdlr.body.lowerBound + 8..<hdlr.body.lowerBound + 12], as: UTF8.self)
        var times: [Int64] = []
        if let edts = kids.first(where: { $0.type == "edts" }),
           let elst = boxes(edts.body.lowerBound, edts.body.upperBound).first(where: { $0.type == "elst" }) {
            let b = elst.body.lowerBound, version = d[b], n = Int(u32(b + 4))
            for i in 0..<n {
                if version == 0 { times.append(Int64(Int32(truncatingIfNeeded: u32(b + 8 + 12 * i + 4)))) }
                else { times.append(u32(b + 8 + 20 * i + 8) << 32 | u32(b + 8 + 20 * i + 12)) }
            }
        }
        result[handler] = times
    }
    return result
}

/// The types of an MP4's top-level boxes, in order.
func topLevelBoxTypes(_ file: String) throws -> [String] {
    let d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
    var types: [String] = [], o = 0
    while o + 8 <= d.count {
        let size = Int(d[o]) << 24 | Int(d[o + 1]) << 16 | Int(d[o + 2]) << 8 | Int(d[o + 3])
        guard size >= 8 else { break }
        types.append(String(decoding: d[o + 4..<o + 8], as: UTF8.self))
        o += size
    }
    return types
}
