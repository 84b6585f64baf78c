import XCTest
@testable import ReelCore

/// Status's audio peak window and the journal's drop reports, on a manual clock.
final class SessionMetersTests: XCTestCase {
    let ms: Nanos = 1_000_000

    private func add(_ w: inout PeakWindow, _ values: [Int16], channels: Int) {
        values.withUnsafeBufferPointer { w.add($0, channels: channels) }
    }

    /// A peak is shown for about a second (10 closed buckets of 100 ms and the open one), per
    /// channel, and |−32768| is full scale.
    func testAPeakStaysAboutOneSecondPerChannel() {
        var w = PeakWindow()
        let t0: Nanos = 5_000 * ms
        XCTAssertEqual(w.read(now: t0, channels: 2), [0, 0])
        add(&w, [-32768, 100, 5, -200], channels: 2)
        var now = t0
        XCTAssertEqual(w.read(now: now, channels: 2), [32768, 200])
        // Reads every 100 ms: the bucket holding the peak closes at the first and falls out of
        // the window 10 rotations later; the read that rotates it out still counts it (1.1 s).
        var shown = 0
        for _ in 0..<15 {
            now += 100 * ms
            if w.read(now: now, channels: 2)[0] == 32768 { shown += 1 }
        }
        XCTAssertEqual(shown, 11, "reads at 100 ms over 1.1 s")
        XCTAssertEqual(w.read(now: now + 100 * ms, channels: 2), [0, 0])
    }

    /// Reads closer together than a bucket do not rotate: a peak is not lost by reading often.
    func testFrequentReadsDoNotShortenTheWindow() {
        var w = PeakWindow()
        var now: Nanos = 0
        _ = w.read(now: now, channels: 1)
        add(&w, [1000], channels: 1)
        var last = now
        while now < 900 * ms {
            now += 7 * ms
            XCTAssertEqual(w.read(now: now, channels: 1), [1000], "at \(now / ms) ms")
            if now - last >= 100 * ms { last = now }
        }
    }

    /// Drops are reported as they happen, then at most every 10 s with the count since the last
    /// report; nothing new, nothing said.
    func testDropsAreReportedAtMostEveryTenSeconds() {
        var d = DropReports()
        let t0: Nanos = 77 * nanosPerSecond
        XCTAssertNil(d.observe(total: 0, now: t0))
        XCTAssertEqual(d.observe(total: 3, now: t0 + 1)?.new, 3)
        XCTAssertNil(d.observe(total: 5, now: t0 + 9 * nanosPerSecond), "too soon")
        let r = d.observe(total: 8, now: t0 + 10 * nanosPerSecond + 1)
        XCTAssertEqual(r?.new, 5); XCTAssertEqual(r?.total, 8)
        XCTAssertNil(d.observe(total: 8, now: t0 + 60 * nanosPerSecond), "nothing new")
        XCTAssertEqual(d.observe(total: 9, now: t0 + 61 * nanosPerSecond)?.new, 1)
    }
}
