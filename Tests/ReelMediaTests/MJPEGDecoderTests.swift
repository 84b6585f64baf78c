import Foundation
import XCTest
@testable import ReelMedia

/// Decodes JPEGs made by ffmpeg at test time (testsrc, 4:2:0 and 4:2:2 as webcams send) and
/// compares with ffmpeg's own decode to I420.
final class MJPEGDecoderTests: XCTestCase {
    func ffmpeg(_ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-nostdin", "-loglevel", "error", "-y"] + args
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw MediaError("ffmpeg \(args) failed") }
    }

    func check(pixFmt: String) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("reel-mjpeg-\(getpid())-\(pixFmt)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let jpg = dir.appendingPathComponent("x.jpg").path, raw = dir.appendingPathComponent("x.yuv").path
        try ffmpeg(["-f", "lavfi", "-i", "testsrc=size=320x180", "-frames:v", "1", "-pix_fmt", pixFmt, "-c:v", "mjpeg", jpg])
        try ffmpeg(["-i", jpg, "-pix_fmt", "yuv420p", "-f", "rawvideo", raw])
        let jpeg = try Data(contentsOf: URL(fileURLWithPath: jpg))
        let want = try Data(contentsOf: URL(fileURLWithPath: raw))
        let dec = try MJPEGDecoder(width: 320, height: 180)
        var out = [UInt8](repeating: 0, count: dec.outputBytes)
        try jpeg.withUnsafeBytes { src in try out.withUnsafeMutableBytes { try dec.decode(src, into: $0) } }
        XCTAssertEqual(want.count, out.count)
        // Different IDCT and chroma filters: allow small differences, but the picture must match.
        var maxDiff = 0, sum = 0
        for (a, b) in zip(out, want) { let d = abs(Int(a) - Int(b)); maxDiff = max(maxDiff, d); sum += d }
        XCTAssertLessThan(Double(sum) / Double(out.count), 2.0, "\(pixFmt): mean abs diff")
        XCTAssertLessThan(maxDiff, 48, pixFmt)
        // Wrong size and garbage are errors, not crashes.
        let small = try MJPEGDecoder(width: 160, height: 90)
        XCTAssertThrowsError(try jpeg.withUnsafeBytes { src in try out.withUnsafeMutableBytes { try small.decode(src, into: $0) } })
        let junk = [UInt8](repeating: 0x42, count: 100)
        XCTAssertThrowsError(try junk.withUnsafeBytes { src in try out.withUnsafeMutableBytes { try dec.decode(src, into: $0) } })
    }

    func test420() throws { try check(pixFmt: "yuvj420p") }
    func test422() throws { try check(pixFmt: "yuvj422p") }
}
