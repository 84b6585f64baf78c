import XCTest
import ReelCore
@testable import ReelMedia

final class DriftResamplerTests: XCTestCase {
    /// Runs the synthetic source with clock skew through DriftLock + DriftResampler and returns the
    /// output position of every beep onset (first sample above 0.05 full scale after a silence).
    private func beepOnsets(skewPpm: Int64, seconds: Int, lock: Bool) throws -> [Int64] {
        let fmt = AudioFormat(sampleRate: 48000, channels: 2)
        let sig = TestAudioSignal(format: fmt, skewPpm: skewPpm)
        let rs = try DriftResampler(format: fmt)
        var dl = DriftLock(rate: fmt.sampleRate)
        var chunk = [Int16](repeating: 0, count: 481 * fmt.channels)
        var onsets: [Int64] = []
        var outPos: Int64 = 0
        var quiet: Int64 = 0
        var i: Int64 = 0
        while sig.chunkStart(i) < Int64(seconds * fmt.sampleRate) {
            let a = sig.chunkStart(i), n = Int(sig.chunkStart(i + 1) - a)
            chunk.withUnsafeMutableBufferPointer { sig.render(from: a, frames: n, into: $0.baseAddress!) }
            if lock {
                let c = dl.compensation(captureTime: sig.captureTime(sample: a), outputPosition: rs.outputPosition)
                try rs.setCompensation(delta: c.delta, distance: c.distance)
            }
            try chunk.withUnsafeBufferPointer { buf in
                try rs.process(UnsafeBufferPointer(rebasing: buf[0..<(n * fmt.channels)])) { out in
                    for f in 0..<(out.count / fmt.channels) {
                        if abs(Int(out[f * fmt.channels])) > 1600 {
                            if quiet > 2400 { onsets.append(outPos) }
                            quiet = 0
                        } else { quiet += 1 }
                        outPos += 1
                    }
                }
            }
            i += 1
        }
        return onsets
    }

    func testLockedBeepsStayOnTheWholeSeconds() throws {
        for ppm: Int64 in [300, -300] {
            let onsets = try beepOnsets(skewPpm: ppm, seconds: 60, lock: true)
            // 60 s of input samples hold beeps 1...59 (and beep 60 too when the card is slow).
            XCTAssertEqual(onsets.count, ppm > 0 ? 59 : 60, "skew \(ppm)")
            for (k, o) in onsets.enumerated() {
                let second = Int64(k + 1)
                // The onset is found a few samples into the sine (threshold), so allow 1 ms.
                XCTAssertLessThanOrEqual(abs(o - second * 48000), 48, "skew \(ppm): beep \(second) at \(o)")
            }
        }
    }

    func testUnlockedBeepsDriftByTheSkew() throws {
        let onsets = try beepOnsets(skewPpm: 300, seconds: 60, lock: false)
        // Beep 59 lands 59 * 14.4 = 850 samples (17.7 ms) late: the drift the lock removes.
        XCTAssertGreaterThan(onsets.last! - 59 * 48000, 800)
    }
}
