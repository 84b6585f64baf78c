import XCTest
import ReelTestSupport
@testable import ReelCore

final class DriftLockTests: XCTestCase {
    /// Simulates an ideal soft-compensating resampler: over each chunk it emits the input count
    /// plus the requested delta pro rata (with exact fractional carry), like swr's compensation.
    /// Returns, per chunk, the controller's own error and the true error: where the sample
    /// should be by its *true* capture time (anchored where the controller anchored, less the
    /// first stamp's jitter) minus where it was put.
    private func simulate(skewPpm: Int64, seconds: Int, rate: Int = 48000, jitterNs: Int64 = 0) -> [Int64] {
        simulateBoth(skewPpm: skewPpm, seconds: seconds, rate: rate, jitterNs: jitterNs).map(\.0)
    }

    private func simulateBoth(skewPpm: Int64, seconds: Int, rate: Int = 48000, jitterNs: Int64 = 0) -> [(Int64, Int64)] {
        var lock = DriftLock(rate: rate)
        let sig = TestAudioSignal(format: AudioFormat(sampleRate: rate, channels: 1), skewPpm: skewPpm)
        var produced: Int64 = 0
        var carryNum: Int64 = 0
        var errors: [(Int64, Int64)] = []
        var firstJitter: Int64?
        var rng = SplitMix64(seed: 7)
        var i: Int64 = 0
        while sig.chunkStart(i) < Int64(seconds * rate) {
            let a = sig.chunkStart(i), n = sig.chunkStart(i + 1) - a
            let jitter = jitterNs > 0 ? Int64.random(in: -jitterNs...jitterNs, using: &rng) : 0
            let trueT = 5_000_000_000 + sig.captureTime(sample: a)
            if firstJitter == nil { firstJitter = jitter }
            let (delta, distance) = lock.compensation(captureTime: trueT + jitter, outputPosition: produced)
            let trueError = rescale(trueT - (lock.anchor! - firstJitter!), Int64(rate), nanosPerSecond) - produced
            // Output for n input samples at the compensated ratio (distance + delta) / distance.
            carryNum += n * Int64(distance + delta)
            produced += carryNum / Int64(distance)
            carryNum %= Int64(distance)
            errors.append((lock.lastError, trueError))
            i += 1
        }
        return errors
    }

    func testLocksOntoAFastOrSlowCardWithSmallSteadyError() {
        for ppm: Int64 in [300, -300, 200, -200, 0] {
            let errors = simulate(skewPpm: ppm, seconds: 120)
            let steady = errors.suffix(100 * 60) // the last minute
            let bound = abs(ppm) * 48000 / 1_000_000 + 2 // P * rate / 1e6 samples, plus rounding
            XCTAssertTrue(steady.allSatisfy { abs($0) <= bound }, "skew \(ppm): steady error up to \(steady.map { abs($0) }.max()!) samples, bound \(bound)")
        }
    }

    func testWithoutTheLockTheDriftWouldGrow() {
        // The same card read at the nominal rate: the position error after 120 s is P * 120 * rate / 1e6.
        let sig = TestAudioSignal(format: AudioFormat(sampleRate: 48000, channels: 1), skewPpm: 300)
        let samplesIn120s = sig.beepStart(120)
        XCTAssertEqual(samplesIn120s - 120 * 48000, 1728) // 36 ms: far beyond half a frame
    }

    func testTimestampJitterIsAbsorbed() {
        // ±2 ms of jitter on every chunk timestamp (a busy box): the controller averages it over
        // about a second, so the true position error stays under 1 ms (46 samples seen here).
        let errors = simulateBoth(skewPpm: 300, seconds: 60, jitterNs: 2_000_000).map(\.1)
        let worst = errors.suffix(3000).map { abs($0) }.max()!
        XCTAssertLessThanOrEqual(worst, 48, "true position error up to \(worst) samples (bound: 1 ms; the A/V target is 17 ms)")
    }
}
