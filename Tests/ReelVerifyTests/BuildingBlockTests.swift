import ReelCore
import Foundation
import XCTest

@testable import ReelVerify

/// The analysis' parts without a codec: exact timecode arithmetic, the oracle's rational
/// helpers, the strip reader, and the streamed beep detector (chunking must not matter).
final class BuildingBlockTests: XCTestCase {
    func testTimecodeInvertsExactly() {
        for fps in [Rational(15), Rational(25), Rational(30), Rational(60), Rational(30000, 1001), Rational(24000, 1001)] {
            for n in stride(from: Int64(0), to: 20000, by: 7) {
                let ms = UInt32(sourceMs(n, fps: fps))
                XCTAssertEqual(frameIndex(fromMs: ms, fps: fps), n, "\(fps) frame \(n)")
                let next = frameIndex(fromMs: ms + 1, fps: fps)
                XCTAssertTrue(next == nil || next == n + 1, "\(fps) frame \(n)")
            }
            let flashes = (0..<Int64(200)).filter { isFlashIndex($0, fps: fps) }
            let want = (1..<Int64(200)).filter { (Rational($0) / fps).floor > (Rational($0 - 1) / fps).floor }
            XCTAssertEqual(flashes, want)
        }
        XCTAssertEqual((0..<Int64(46)).filter { isFlashIndex($0, fps: Rational(15)) }, [15, 30, 45])
    }

    func testFractionMatchesPython() {
        // Python: Rational(15360, 1024) / values from fractions.Rational.limit_denominator
        XCTAssertEqual(Rational(1, 1) / (Rational(1001) * Rational(1, 30000)), Rational(30000, 1001))
        XCTAssertEqual(Rational(314159, 100000).limitDenominator(1001), Rational(355, 113))
        XCTAssertEqual(Rational(2997, 100).limitDenominator(1001), Rational(2997, 100))
        XCTAssertEqual(Rational(29970029, 1000000).limitDenominator(1001), Rational(30000, 1001))
        XCTAssertEqual(Rational(5, 2).roundedHalfEven, 2)
        XCTAssertEqual(Rational(7, 2).roundedHalfEven, 4)
        XCTAssertEqual(Rational(-5, 2).roundedHalfEven, -2)
        XCTAssertEqual(Rational(-7, 3).floor, -3)
        XCTAssertEqual(Rational(-7, 3).ceil, -2)
        XCTAssertEqual(Rational(exactDecimal: "2.0667"), Rational(20667, 10000))
        XCTAssertEqual(Rational(exactDecimal: "31/15"), Rational(31, 15))
        XCTAssertEqual(Rational(exactDecimal: "-0.5"), Rational(-1, 2))
        XCTAssertEqual(Rational(exactDecimal: ".25"), Rational(1, 4))
        XCTAssertEqual(Rational(exactDecimal: "7"), Rational(7))
        for bad in ["", "-", "1.2.3", "x", "1/0", "1e3", "."] { XCTAssertNil(Rational(exactDecimal: bad), bad) }
        XCTAssertEqual(inferFps(Rational(15), steps: [1024: 78], tb: Rational(1, 15360)).0, Rational(15))
        // r_frame_rate far from the pts steps: the steps win
        let (fps, mode) = inferFps(Rational(30), steps: [1024: 78, 3072: 1], tb: Rational(1, 15360))
        XCTAssertEqual(fps, Rational(15))
        XCTAssertEqual(mode, Rational(15))
    }

    func testStripReaderReadsTheContractFrame() {
        for n in [0, 14, 15, 16, 31, 35, 1234] {
            let f = Synth.frame(n)
            let g = StripGeometry(width: Synth.width, height: Synth.height)
            let (ms, margin, below) = f.withUnsafeBufferPointer { g.read($0.baseAddress!, stride: Synth.width) }
            XCTAssertEqual(ms, Synth.frameMs(n))
            XCTAssertEqual(margin, 109)                          // 235 - 125 or 125 - 16
            XCTAssertEqual(below > Thresholds.flash, Synth.isFlash(n), "frame \(n): \(below)")
        }
    }

    /// Samples with beeps per the contract, AAC-like pre-echo before beep 2 and a little noise.
    func signal(rate: Int, seconds: Double) -> [Int16] {
        var g = SystemRandomNumberGenerator()
        let n = Int(seconds * Double(rate))
        return (0..<n).map { m in
            let k = m / rate, j = m - k * rate
            var x = 0.0
            if k >= 1 && j < rate / 10 { x = 0.5 * sin(2 * Double.pi * 1000 * Double(j) / Double(rate)) }
            if m >= 2 * rate - rate / 50 && m < 2 * rate { x += 0.08 * sin(2 * Double.pi * 1000 * Double(m) / Double(rate)) }
            x += Double.random(in: -0.005...0.005, using: &g)
            return Int16((x * 32767).rounded())
        }
    }

    func detect(_ x: [Int16], rate: Int, chunk: Int) -> [Beep] {
        let d = BeepDetector(rate: rate)
        x.withUnsafeBufferPointer { buf in
            var i = 0
            while i < buf.count {
                let n = min(chunk, buf.count - i)
                d.feed(UnsafeBufferPointer(rebasing: buf[i..<i + n]))
                i += n
            }
        }
        return d.finish()
    }

    func testBeepOnsetsExactAndPreEchoIgnored() {
        for rate in [48000, 44100] {
            let x = signal(rate: rate, seconds: 3.5)
            let beeps = detect(x, rate: rate, chunk: 1024)
            XCTAssertEqual(beeps.count, 3, "\(rate)")
            for (k, b) in zip(1..., beeps) {
                XCTAssertEqual(b.onsetSample, Double(k * rate), accuracy: 0.05 * Double(rate) / 1000, "\(rate) beep \(k)")
                XCTAssertTrue(b.phaseOk)
                XCTAssertEqual(b.durationMs, 100, accuracy: 0.5)
            }
        }
    }

    /// Long enough (12 s) that the detector drops its buffers several times; any chunking gives
    /// bit-identical beeps.
    func testChunkingDoesNotChangeTheResult() {
        let rate = 48000
        var x = signal(rate: rate, seconds: 12)
        // a beep at the very end, cut by the end of the stream
        for j in 0..<2000 { x[x.count - 2000 + j] = Int16((0.5 * sin(2 * Double.pi * 1000 * Double(j) / 48000) * 32767).rounded()) }
        let whole = detect(x, rate: rate, chunk: x.count)
        XCTAssertEqual(whole.count, 12)
        for chunk in [13, 1024, 4800, 100_000] {
            let b = detect(x, rate: rate, chunk: chunk)
            XCTAssertEqual(b.map(\.onsetSample), whole.map(\.onsetSample), "chunk \(chunk)")
            XCTAssertEqual(b.map(\.endSample), whole.map(\.endSample), "chunk \(chunk)")
            XCTAssertEqual(b.map(\.amplitude), whole.map(\.amplitude), "chunk \(chunk)")
        }
        XCTAssertEqual(whole.last!.endSample, Double(x.count), accuracy: 25)
    }
}
