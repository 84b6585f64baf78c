import XCTest
@testable import ReelCore

final class FrameSlotsTests: XCTestCase {
    let fps = Rational(30)
    func frameNs(_ k: Int64) -> Nanos { rescale(k, nanosPerSecond, 30) }

    /// Frames on the grid take consecutive slots; none dropped.
    func testOnTheGrid() {
        var s = FrameSlots(fps: fps)
        XCTAssertEqual((0..<300).map { s.place(frameNs($0)) }, (0..<300).map { Optional(Int64($0)) })
        XCTAssertEqual(s.collisions, 0)
    }

    /// A camera 440 ppm fast against the clock (vivid under emulation): over an hour every kept
    /// frame stays within half a frame of its capture time and a frame is dropped per slot gained.
    /// Pushing colliding frames to the next slot instead would leave the last frames 1.6 s late.
    func testFastCameraIsTimedNotCounted() {
        var s = FrameSlots(fps: fps)
        let n: Int64 = 30 * 3600
        var worst: Int64 = 0
        for k in 0..<n {
            let t = rescale(k, nanosPerSecond * 1_000_000, 30 * 1_000_440)   // k / (30 * 1.00044) s
            guard let slot = s.place(t) else { continue }
            worst = max(worst, abs(frameNs(slot) - t))
        }
        XCTAssertLessThanOrEqual(worst, frameNs(1) / 2 + 1)
        XCTAssertEqual(Double(s.collisions), Double(n) * 440e-6, accuracy: 2)
    }

    /// A camera slow against the clock, or a lost frame: empty slots, nothing dropped.
    func testSlowCameraLeavesSlotsEmpty() {
        var s = FrameSlots(fps: fps)
        var slots: [Int64] = []
        for k: Int64 in 0..<30_000 {
            if let slot = s.place(rescale(k, nanosPerSecond * 1_000_000, 30 * 999_000)) { slots.append(slot) }
        }
        XCTAssertEqual(s.collisions, 0)
        XCTAssertEqual(slots.count, 30_000)
        XCTAssertEqual(slots.last, 30_029)   // frame 29 999 at 29 999 / 0.999 = 30 029.03 slots: 30 left empty
    }

    /// An undone take: the slots it took are free again, the next frame takes the first of them.
    func testRollBackFreesTheSlotsOfARemovedTake() {
        var s = FrameSlots(fps: fps)
        for k: Int64 in 0..<10 { _ = s.place(frameNs(k)) }
        let before = s.lastSlot
        for k: Int64 in 10..<20 { _ = s.place(frameNs(k)) }
        s.rollBack(to: before)
        XCTAssertEqual(s.place(frameNs(10)), 10)
        XCTAssertEqual(s.collisions, 0)
        s.rollBack(to: nil)
        XCTAssertEqual(s.place(0), 0)
    }

    /// Jitter past half a frame: a late frame takes the next slot and the frame that belonged there
    /// is dropped; the frames after it are back on their own slots (no cascade).
    func testJitterDoesNotCascade() {
        var s = FrameSlots(fps: fps)
        var times = (0..<10).map { frameNs(Int64($0)) }
        times[4] += 20_000_000          // 20 ms late: nearest slot 5
        let placed = times.map { s.place($0) }
        XCTAssertEqual(placed, [0, 1, 2, 3, 5, nil, 6, 7, 8, 9])
        XCTAssertEqual(s.collisions, 1)
    }
}
