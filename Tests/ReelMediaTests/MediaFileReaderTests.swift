import Foundation
import XCTest
import ReelCore
@testable import ReelMedia

/// The file sources' reader: a dropped item must be skipped in the file too, so that what is
/// read next is exactly what a reader that never dropped would read next.
final class MediaFileReaderTests: XCTestCase {
    private func ffmpeg(_ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-v", "error", "-y"] + args
        try p.run()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, "ffmpeg \(args)")
    }

    func testSkippingKeepsVideoAndAudioInStep() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("reel-reader-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let y4m = dir.appendingPathComponent("in.y4m").path, wav = dir.appendingPathComponent("in.wav").path
        try ffmpeg(["-f", "lavfi", "-i", "testsrc2=size=64x36:rate=10", "-frames:v", "4", "-pix_fmt", "yuv420p", y4m])
        try ffmpeg(["-f", "lavfi", "-i", "sine=f=440:r=8000", "-t", "1", "-c:a", "pcm_s16le", wav])

        let frameBytes = PixelFormat.i420.frameBytes(width: 64, height: 36)
        func frames(_ r: MediaFileReader, _ n: Int) throws -> [[UInt8]] {
            try (0..<n).map { _ in
                var b = [UInt8](repeating: 0, count: frameBytes)
                XCTAssertTrue(try b.withUnsafeMutableBytes { try r.readVideoFrame(into: $0) })
                return b
            }
        }
        let all = try frames(MediaFileReader(path: y4m, video: true), 4)
        XCTAssertNotEqual(all[1], all[2])
        let skipping = try MediaFileReader(path: y4m, video: true)
        XCTAssertTrue(try skipping.skipVideoFrame())
        XCTAssertTrue(try skipping.skipVideoFrame())
        XCTAssertEqual(try frames(skipping, 2), Array(all[2...]))
        XCTAssertFalse(try skipping.skipVideoFrame()) // the end

        func samples(_ r: MediaFileReader, _ n: Int) throws -> [Int16] {
            var b = [Int16](repeating: 0, count: n), got = 0
            while got < n {
                let k = try b.withUnsafeMutableBufferPointer { try r.readAudio(into: $0.baseAddress! + got, maxFrames: n - got) }
                XCTAssertGreaterThan(k, 0); if k == 0 { break }
                got += k
            }
            return b
        }
        let pcm = try samples(MediaFileReader(path: wav, video: false), 8000)
        let a = try MediaFileReader(path: wav, video: false)
        var skipped = 0
        while skipped < 3001 { let k = try a.skipAudio(maxFrames: 3001 - skipped); XCTAssertGreaterThan(k, 0); skipped += k }
        XCTAssertEqual(try samples(a, 100), Array(pcm[3001..<3101]))
        XCTAssertNotEqual(Array(pcm[3001..<3101]), Array(pcm[0..<100])) // not a whole number of periods
    }
}
