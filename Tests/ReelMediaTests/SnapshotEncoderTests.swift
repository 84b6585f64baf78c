import Foundation
import ReelCore
import XCTest
@testable import ReelMedia

/// A synthetic test-pattern frame (YUYV, as a webcam sends) to JPEG and back with ffmpeg: the
/// size, the timecode strip and the picture survive, scaled or not.
final class SnapshotEncoderTests: XCTestCase {
    func decodeGray(_ jpeg: [UInt8]) throws -> [UInt8] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("reel-snap-\(getpid())-\(jpeg.count)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let jpg = dir.appendingPathComponent("s.jpg"), raw = dir.appendingPathComponent("s.gray")
        try Data(jpeg).write(to: jpg)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-nostdin", "-loglevel", "error", "-y", "-i", jpg.path, "-f", "rawvideo", "-pix_fmt", "gray", raw.path]
        try p.run(); p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        return [UInt8](try Data(contentsOf: raw))
    }

    func strip(_ y: [UInt8], width w: Int, height h: Int) -> UInt32 {
        var ms: UInt32 = 0
        for i in 0..<32 {
            var sum = 0, n = 0
            for r in (h / 32)..<(h / 8 - h / 32) { for c in (i * w / 32 + w / 128)..<((i + 1) * w / 32 - w / 128) { sum += Int(y[r * w + c]); n += 1 } }
            ms = ms << 1 | (sum / n > 128 ? 1 : 0)
        }
        return ms
    }

    func testTimecodeSurvivesAndScales() throws {
        let f = VideoFormat(width: 320, height: 180, fps: Rational(30, 1), pixelFormat: .yuyv)
        let pattern = TestVideoPattern(format: f)
        var frame = [UInt8](repeating: 0, count: f.pixelFormat.frameBytes(width: 320, height: 180))
        frame.withUnsafeMutableBytes { pattern.render(frame: 1234, into: $0) }  // 41133 ms
        let full = try frame.withUnsafeBytes { try SnapshotEncoder.encode($0, width: 320, height: 180, format: .yuyv) }
        XCTAssertEqual(full.width, 320); XCTAssertEqual(full.height, 180)
        XCTAssertEqual(Array(full.jpeg.prefix(3)), [0xFF, 0xD8, 0xFF])
        let y = try decodeGray(full.jpeg)
        XCTAssertEqual(y.count, 320 * 180)
        XCTAssertEqual(strip(y, width: 320, height: 180), 41133)
        // Full range: the strip's white (Y=235) comes out near 255, its black (16) near 0.
        XCTAssertGreaterThan(y.max()!, 245)
        let small = try frame.withUnsafeBytes { try SnapshotEncoder.encode($0, width: 320, height: 180, format: .yuyv, targetWidth: 160) }
        XCTAssertEqual(small.width, 160); XCTAssertEqual(small.height, 90)
        XCTAssertEqual(strip(try decodeGray(small.jpeg), width: 160, height: 90), 41133)
    }

    func testSizeRules() {
        XCTAssertNil(SnapshotEncoder.scaledSize(width: 320, height: 180, target: 640))  // never enlarged
        XCTAssertNil(SnapshotEncoder.scaledSize(width: 320, height: 180, target: 8))
        XCTAssertEqual(SnapshotEncoder.scaledSize(width: 1280, height: 720, target: 101)!.width, 100)
        XCTAssertEqual(SnapshotEncoder.scaledSize(width: 1280, height: 720, target: 100)!.height, 56)
        XCTAssertThrowsError(try [UInt8](repeating: 0, count: 320 * 180 * 2).withUnsafeBytes {
            try SnapshotEncoder.encode($0, width: 320, height: 180, format: .yuyv, targetWidth: 4000)
        }) { XCTAssertTrue("\($0)".contains("use a width from 16 to 320"), "\($0)") }
    }
}
