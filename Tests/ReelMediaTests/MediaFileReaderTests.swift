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

    /// The frames read are the file's frames, byte for byte (ffmpeg's rawvideo of the same file),
    /// through both read paths, for 4:2:0 and 4:2:2; a file cut inside a frame is an error that
    /// says so, not a short frame.
    func testFramesAreTheFilesBytesAndTruncationIsAnError() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("reel-reader-raw-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for (pf, name) in [(PixelFormat.i420, "yuv420p"), (PixelFormat.i422, "yuv422p")] {
            let y4m = dir.appendingPathComponent("\(name).y4m").path, raw = dir.appendingPathComponent("\(name).raw").path
            try ffmpeg(["-f", "lavfi", "-i", "testsrc2=size=64x36:rate=10", "-frames:v", "5", "-pix_fmt", name, "-strict", "-1", y4m])
            try ffmpeg(["-i", y4m, "-f", "rawvideo", "-pix_fmt", name, raw])
            let want = try [UInt8](Data(contentsOf: URL(fileURLWithPath: raw)))
            let fb = pf.frameBytes(width: 64, height: 36)
            XCTAssertEqual(want.count, 5 * fb)
            let a = try MediaFileReader(path: y4m, video: true), b = try MediaFileReader(path: y4m, video: true)
            for i in 0..<5 {
                var got = [UInt8](repeating: 0, count: fb)
                XCTAssertTrue(try got.withUnsafeMutableBytes { try a.readVideoFrame(into: $0) })
                XCTAssertEqual(got, Array(want[i * fb..<(i + 1) * fb]), "\(name) frame \(i), readVideoFrame(into:)")
                var viaBody: [UInt8] = []
                XCTAssertTrue(try b.readVideoFrame { viaBody = Array($0) })
                XCTAssertEqual(viaBody, got, "\(name) frame \(i), readVideoFrame(_:)")
            }
            var spare = [UInt8](repeating: 0, count: fb)
            XCTAssertFalse(try spare.withUnsafeMutableBytes { try a.readVideoFrame(into: $0) })
            XCTAssertFalse(try b.readVideoFrame { _ in XCTFail("no frame after the last") })

            let whole = try Data(contentsOf: URL(fileURLWithPath: y4m))
            let cut = dir.appendingPathComponent("\(name)-cut.y4m").path
            try whole.prefix(whole.count - fb / 2).write(to: URL(fileURLWithPath: cut))
            let c = try MediaFileReader(path: cut, video: true)
            for _ in 0..<4 { XCTAssertTrue(try spare.withUnsafeMutableBytes { try c.readVideoFrame(into: $0) }) }
            XCTAssertThrowsError(try spare.withUnsafeMutableBytes { try c.readVideoFrame(into: $0) }) { e in
                XCTAssertTrue("\(e)".contains("frame 5 is cut short"), "\(e)")
            }
        }
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
