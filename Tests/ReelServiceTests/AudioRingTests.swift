import Foundation
import XCTest
import ReelCore
@testable import ReelPipeline

/// The ring between the pipeline thread and the AAC thread (`AudioEncoderThread`).
final class AudioRingTests: XCTestCase {
    func testWrapsAroundInTwoPiecesAndKeepsTheValues() {
        let ring = AudioRing(channels: 2, capacityFrames: 5)
        let a: [Int16] = [1, -1, 2, -2, 3, -3]            // 3 frames
        a.withUnsafeBufferPointer { XCTAssertTrue(ring.write($0.baseAddress, frames: 3)) }
        var got: [[Int16]] = []
        XCTAssertEqual(ring.read(maxFrames: 2) { got.append(Array($0)) }, 2)
        XCTAssertEqual(got, [[1, -1, 2, -2]])
        // 4 frames from slot 3: slots 3, 4 then 0, 1.
        let b: [Int16] = [4, -4, 5, -5, 6, -6, 7, -7]
        b.withUnsafeBufferPointer { XCTAssertTrue(ring.write($0.baseAddress, frames: 4)) }
        XCTAssertEqual(ring.count, 5)
        got = []
        XCTAssertEqual(ring.read { got.append(Array($0)) }, 5)
        XCTAssertEqual(got, [[3, -3, 4, -4, 5, -5], [6, -6, 7, -7]], "oldest first, split at the end of the storage")
        XCTAssertEqual(ring.count, 0)
        XCTAssertEqual(ring.read { _ in XCTFail("nothing to read") }, 0)
    }

    func testFullRingRefusesWholeWritesAndSilenceIsZeros() {
        let ring = AudioRing(channels: 1, capacityFrames: 4)
        let x: [Int16] = [9, 9, 9]
        x.withUnsafeBufferPointer { XCTAssertTrue(ring.write($0.baseAddress, frames: 3)) }
        XCTAssertEqual(ring.room, 1)
        x.withUnsafeBufferPointer { XCTAssertFalse(ring.write($0.baseAddress, frames: 2), "no room for 2: nothing written") }
        XCTAssertEqual(ring.count, 3)
        XCTAssertTrue(ring.write(nil, frames: 1))
        XCTAssertEqual(ring.room, 0)
        XCTAssertFalse(ring.write(nil, frames: 1))
        var got: [Int16] = []
        ring.read { got += $0 }
        XCTAssertEqual(got, [9, 9, 9, 0])
        XCTAssertEqual(ring.room, 4)
    }

    /// One producer and one consumer thread through a ring much smaller than what passes, in odd
    /// chunk sizes: every frame arrives once, in order.
    func testOrderAcrossThreadsThroughManyWrapsAndFulls() {
        let ring = AudioRing(channels: 2, capacityFrames: 37)
        let total = 200_000
        let done = DispatchSemaphore(value: 0)
        let received = ReceivedBox()
        Thread {
            var next = 0, bad = 0
            while next < total {
                ring.read(maxFrames: 1 + next % 23) { p in
                    for i in stride(from: 0, to: p.count, by: 2) {
                        if p[i] != Int16(truncatingIfNeeded: next) || p[i + 1] != ~Int16(truncatingIfNeeded: next) { bad += 1 }
                        next += 1
                    }
                }
            }
            received.set(next, bad)
            done.signal()
        }.start()
        var chunk = [Int16](repeating: 0, count: 2 * 50)
        var sent = 0
        while sent < total {
            let n = min(total - sent, 1 + sent % 31)  // <= capacity: a write is all or nothing
            for i in 0..<n { chunk[2 * i] = Int16(truncatingIfNeeded: sent + i); chunk[2 * i + 1] = ~Int16(truncatingIfNeeded: sent + i) }
            while !chunk.withUnsafeBufferPointer({ ring.write($0.baseAddress, frames: n) }) {}  // full: spin until read
            sent += n
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        let (count, bad) = received.get()
        XCTAssertEqual(count, total)
        XCTAssertEqual(bad, 0, "frames out of order or torn")
    }
}

/// @unchecked Sendable: written once by the consumer thread before `done.signal()`, read after the wait.
private final class ReceivedBox: @unchecked Sendable {
    private var value = (0, 0)
    func set(_ n: Int, _ bad: Int) { value = (n, bad) }
    func get() -> (Int, Int) { value }
}
