import XCTest
@testable import ReelPipeline

/// The pipeline's FIFO of samples waiting for the timeline: oldest first, in at most two pieces
/// where its storage wraps, silence as zeros, exactly what was appended.
final class AudioFifoTests: XCTestCase {
    func testAppendConsumeAndDiscardAcrossTheWrap() {
        var fifo = AudioFifo(channels: 2, capacityFrames: 5)
        let a: [Int16] = [1, -1, 2, -2, 3, -3]
        a.withUnsafeBufferPointer { fifo.append($0.baseAddress, frames: 3) }
        var got: [[Int16]] = []
        fifo.consume(2) { got.append(Array($0)) }
        XCTAssertEqual(got, [[1, -1, 2, -2]])
        XCTAssertEqual(fifo.count, 1)
        // 3 frames from frame 3: slots 3, 4 then 0; then one frame of silence in slot 1.
        let b: [Int16] = [4, -4, 5, -5, 6, -6]
        b.withUnsafeBufferPointer { fifo.append($0.baseAddress, frames: 3) }
        fifo.append(nil, frames: 1)
        XCTAssertEqual(fifo.count, 5)
        XCTAssertEqual(fifo.room, 0)
        got = []
        fifo.consume(4) { got.append(Array($0)) }
        XCTAssertEqual(got, [[3, -3, 4, -4, 5, -5], [6, -6]], "oldest first, split where the storage ends")
        fifo.discard(1)  // the silence
        XCTAssertEqual(fifo.count, 0)
        a.withUnsafeBufferPointer { fifo.append($0.baseAddress, frames: 3) }
        got = []
        fifo.consume(3) { got.append(Array($0)) }
        XCTAssertEqual(got.flatMap { $0 }, a)
    }

    func testSilenceIsZeros() {
        var fifo = AudioFifo(channels: 1, capacityFrames: 4)
        let x: [Int16] = [9, 9, 9, 9]
        x.withUnsafeBufferPointer { fifo.append($0.baseAddress, frames: 4) }
        fifo.discard(4)
        fifo.append(nil, frames: 3)
        var got: [Int16] = []
        fifo.consume(3) { got += $0 }
        XCTAssertEqual(got, [0, 0, 0], "silence overwrites what the slots held")
    }
}
