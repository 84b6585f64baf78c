import XCTest
@testable import ReelCore

final class TestSignalsTests: XCTestCase {
    /// Reads the strip back the way any checker would: centre of each cell, threshold.
    private func readStrip(_ luma: (Int, Int) -> UInt8, width: Int, height: Int) -> UInt32 {
        var ms: UInt32 = 0
        let cw = width / 32
        for i in 0..<32 {
            let v = luma(i * cw + cw / 2, height / 16)
            if v > 125 { ms |= 1 << UInt32(31 - i) }
        }
        return ms
    }

    func testStripFlashAndPatternInEveryPixelFormat() {
        for pf in PixelFormat.allCases {
            for (w, h, fps) in [(640, 360, Rational(30)), (320, 180, Rational(15)), (352, 288, Rational(30000, 1001))] {
                let f = VideoFormat(width: w, height: h, fps: fps, pixelFormat: pf)
                let p = TestVideoPattern(format: f)
                var buf = [UInt8](repeating: 0, count: pf.frameBytes(width: w, height: h))
                for n: Int64 in [0, 1, 29, 30, 31, 45, 1000, 123_456] {
                    buf.withUnsafeMutableBytes { p.render(frame: n, into: $0) }
                    func luma(_ x: Int, _ y: Int) -> UInt8 {
                        switch pf { case .yuyv: return buf[(y * w + x) * 2]; case .uyvy: return buf[(y * w + x) * 2 + 1]; default: return buf[y * w + x] }
                    }
                    let expected = UInt32(n * 1000 * fps.den / fps.num)
                    XCTAssertEqual(readStrip(luma, width: w, height: h), expected, "\(pf) \(w)x\(h) frame \(n)")
                    var sum = 0
                    for y in (h / 8)..<h { for x in 0..<w { sum += Int(luma(x, y)) } }
                    let mean = sum / (w * (h - h / 8))
                    if p.isFlash(frame: n) { XCTAssertEqual(mean, 235, "\(pf) flash \(n)") }
                    else { XCTAssertLessThanOrEqual(mean, 110, "\(pf) pattern \(n)") }
                }
            }
        }
        let p30 = TestVideoPattern(format: VideoFormat(width: 64, height: 32, fps: Rational(30), pixelFormat: .yuyv))
        XCTAssertEqual((0..<100).filter { p30.isFlash(frame: Int64($0)) }, [30, 60, 90])
        let pNtsc = TestVideoPattern(format: VideoFormat(width: 64, height: 32, fps: Rational(30000, 1001), pixelFormat: .yuyv))
        XCTAssertEqual((0..<100).filter { pNtsc.isFlash(frame: Int64($0)) }, [30, 60, 90]) // 29.97: frame 30 is t=1.001
        XCTAssertEqual(pNtsc.timecodeMs(frame: 30), 1001)
    }

    func testPatternMovesEveryFrame() {
        let f = VideoFormat(width: 64, height: 32, fps: Rational(30), pixelFormat: .i420)
        let p = TestVideoPattern(format: f)
        var a = [UInt8](repeating: 0, count: f.pixelFormat.frameBytes(width: 64, height: 32)), b = a
        a.withUnsafeMutableBytes { p.render(frame: 1, into: $0) }
        b.withUnsafeMutableBytes { p.render(frame: 2, into: $0) }
        XCTAssertNotEqual(Array(a[(64 * 8)..<(64 * 32)]), Array(b[(64 * 8)..<(64 * 32)]))
    }

    func testBeepsAtWholeSecondsWithAndWithoutSkew() {
        for (rate, ch) in [(48000, 1), (44100, 2)] {
            let s = TestAudioSignal(format: AudioFormat(sampleRate: rate, channels: ch))
            var buf = [Int16](repeating: 7, count: 3 * rate * ch)
            buf.withUnsafeMutableBufferPointer { s.render(from: 0, frames: 3 * rate, into: $0.baseAddress!) }
            XCTAssertTrue(buf[0..<(rate * ch)].allSatisfy { $0 == 0 })
            XCTAssertEqual(buf[(rate + 1) * ch], buf[(rate + 1) * ch + ch - 1])          // same on every channel
            XCTAssertGreaterThan(buf[(rate + rate / 4000) * ch], 16000)                   // quarter period: peak ~0.5
            XCTAssertTrue(buf[((rate + rate / 10) * ch)..<(2 * rate * ch)].allSatisfy { $0 == 0 })
            // Chunked rendering equals one-shot rendering.
            var chunked = [Int16](repeating: 0, count: 3 * rate * ch)
            var i: Int64 = 0
            while s.chunkStart(i) < Int64(3 * rate) {
                let a = s.chunkStart(i), b = min(s.chunkStart(i + 1), Int64(3 * rate))
                chunked.withUnsafeMutableBufferPointer { s.render(from: a, frames: Int(b - a), into: $0.baseAddress! + Int(a) * ch) }
                i += 1
            }
            XCTAssertEqual(chunked, buf)
        }
        let skewed = TestAudioSignal(format: AudioFormat(sampleRate: 48000, channels: 1), skewPpm: 300)
        XCTAssertEqual(skewed.beepStart(10), 480_144)                       // round(10 * 48000 * 1.0003)
        XCTAssertEqual(skewed.captureTime(sample: 480_144), 10 * nanosPerSecond) // beep k is captured at T0 + k
        XCTAssertEqual(TestAudioSignal(format: AudioFormat(sampleRate: 22050, channels: 1)).chunkStart(3), 661)
    }
}
