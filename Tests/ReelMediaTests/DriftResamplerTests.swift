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

    /// The filter holds the last ~16 input frames back; `flush` gives them out, so a file's last
    /// samples are not replaced by silence at the end of a recording.
    func testFlushGivesBackTheFramesInsideTheFilter() throws {
        let fmt = AudioFormat(sampleRate: 48000, channels: 2)
        let rs = try DriftResampler(format: fmt)
        let n = 4800
        let input = [Int16](repeating: 1000, count: n * fmt.channels)
        var out: [Int16] = []
        try input.withUnsafeBufferPointer { try rs.process($0) { out.append(contentsOf: $0) } }
        let held = n - out.count / fmt.channels
        XCTAssertGreaterThan(held, 0, "the filter holds frames back (what flush is for)")
        XCTAssertEqual(rs.outputPosition, Int64(n), "produced + the filter's delay")
        try rs.flush { out.append(contentsOf: $0) }
        XCTAssertEqual(out.count, n * fmt.channels, "every input frame comes out once")
        XCTAssertEqual(rs.produced, Int64(n))
        // The frames that came out of the flush are the signal, not the filter's padding.
        for v in out.suffix(held * fmt.channels) { XCTAssertEqual(Int(v), 1000, accuracy: 30) }
        try rs.flush { _ in XCTFail("a second flush has nothing left") }
    }
}
