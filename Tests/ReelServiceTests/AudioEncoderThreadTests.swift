import Foundation
import XCTest
import ReelCore
import ReelMedia
import ReelSystem
@testable import ReelPipeline

/// The AAC encoder's thread: everything submitted is consumed in order before `close()` returns;
/// `quiesce()` hands what `consume` works on back to the pipeline; a failure there reaches the
/// pipeline once and never blocks it.
final class AudioEncoderThreadTests: XCTestCase {
    /// Through a ring far smaller than the audio: the AAC thread encodes everything submitted and
    /// the file holds it all (decoded by FFmpeg), silence included.
    func testEveryFrameSubmittedIsEncodedBeforeCloseReturns() throws {
        let path = NSTemporaryDirectory() + "reel-aac-thread-\(UUID().uuidString).mp4"
        defer { unlink(path) }
        let rate = 48000
        // nonisolated(unsafe): used by the AAC thread between start() and close(), by this one after.
        nonisolated(unsafe) let aac = try AACEncoder(format: AudioFormat(sampleRate: rate, channels: 1), settings: AACSettings())
        let mux = try MP4Writer(path: path, video: nil, audio: aac)
        let zeros = [Int16](repeating: 0, count: 1024)
        let t = AudioEncoderThread(channels: 1, capacityFrames: 700) { item in
            switch item {
            case let .keep(s): try aac.encode(interleaved: s) { try mux.writeAudio($0) }
            case var .silence(n):
                while n > 0 {
                    let k = min(n, 1024)
                    try zeros.withUnsafeBufferPointer { try aac.encode(interleaved: UnsafeBufferPointer(rebasing: $0[0..<k])) { try mux.writeAudio($0) } }
                    n -= k
                }
            case .drop, .gap, .command: XCTFail("only kept samples and silence were submitted")
            }
        }
        t.start()
        let tone = (0..<480).map { Int16(8000 * sin(Double($0) * 2 * Double.pi / 48)) }  // 1 kHz
        for _ in 0..<200 { tone.withUnsafeBufferPointer { t.submit($0.baseAddress!, frames: 480) } }  // 2 s
        t.submitSilence(frames: rate)                                                                 // 1 s of silence
        try t.close()
        XCTAssertNil(t.takeFailure())
        try aac.flush { try mux.writeAudio($0) }  // the caller's again after close()
        try mux.finish()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-v", "error", "-i", path, "-f", "s16le", "-acodec", "pcm_s16le", "-"]
        let out = Pipe(); p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        let samples = data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        // FFmpeg 5.1 shows the 1024 priming samples too (see MP4Writer); the last frame may be padded.
        guard samples.count >= 3 * rate else { return XCTFail("\(samples.count) samples: not all 3 s are in the file") }
        let loud = samples.prefix(2 * rate).filter { abs(Int($0)) > 4000 }.count
        XCTAssertGreaterThan(loud, rate / 2, "the tone is there")
        let tail = samples[(2 * rate + 2048)..<(3 * rate)]
        XCTAssertTrue(tail.allSatisfy { abs(Int($0)) < 200 }, "then silence")
    }

    /// After `quiesce()` every frame submitted has been consumed and the consumer waits: what the
    /// pipeline changes then (an undo swaps the encoder and the file) is what every later frame
    /// meets, and no earlier frame does. Without the quiesce, frames in flight would count for
    /// the new target.
    func testQuiesceHandsTheConsumersStateBackToThePipeline() throws {
        let box = TargetBox()
        let t = AudioEncoderThread(channels: 2, capacityFrames: 257) { if case let .keep(s) = $0 { box.consumed(s.count / 2) } }
        t.quiesce()  // before start: nothing to wait for
        t.start()
        t.quiesce()  // nothing submitted: returns at once
        let chunk = [Int16](repeating: 7, count: 2 * 333)
        for _ in 0..<30 { chunk.withUnsafeBufferPointer { t.submit($0.baseAddress!, frames: 333) } }
        t.quiesce()
        XCTAssertEqual(box.counts, [9990, 0], "all of it consumed when quiesce() returns")
        box.target = 1
        for _ in 0..<15 { chunk.withUnsafeBufferPointer { t.submit($0.baseAddress!, frames: 333) } }
        try t.close()
        XCTAssertEqual(box.counts, [9990, 4995])
        try t.close()  // idempotent
    }

    /// A failed write on the AAC thread is handed to the pipeline once, with its errno (so the
    /// recording ends as for a failed video write), and the pipeline never waits on that thread
    /// afterwards: what it submits is read and dropped, and close() returns.
    func testAFailureThereReachesThePipelineOnceAndNeverBlocksIt() throws {
        let path = NSTemporaryDirectory() + "reel-aac-fail-\(UUID().uuidString).mp4"
        defer { unlink(path) }
        // nonisolated(unsafe): used by the AAC thread between start() and close(), by this one after.
        nonisolated(unsafe) let aac = try AACEncoder(format: AudioFormat(sampleRate: 48000, channels: 1), settings: AACSettings())
        let mux = try MP4Writer(path: path, video: nil, audio: aac)
        let box = TargetBox()
        let t = AudioEncoderThread(channels: 1, capacityFrames: 100) {
            guard case let .keep(s) = $0 else { return }
            box.consumed(s.count)
            try aac.encode(interleaved: s) { try mux.writeAudio($0) }
        }
        t.start()
        mux.markFailed("test: the disk is full", systemError: ENOSPC)
        let tone = (0..<480).map { Int16(8000 * sin(Double($0) * 2 * Double.pi / 48)) }
        for _ in 0..<100 { tone.withUnsafeBufferPointer { t.submit($0.baseAddress!, frames: 480) } }  // 480 times the ring
        t.quiesce()
        let e = try XCTUnwrap(t.takeFailure() as? MediaError, "the failed write reaches the pipeline")
        XCTAssertEqual(e.systemError, ENOSPC)
        XCTAssertNil(t.takeFailure(), "once")
        XCTAssertLessThan(box.counts[0], 100 * 480, "after the failure the samples are dropped, not encoded")
        t.submitSilence(frames: 48000)
        XCTAssertNoThrow(try t.close(), "the failure was taken: close() does not throw it again")
        try? aac.flush { _ in }
    }

    /// An unpaced run's encoder runs at idle priority, in the CPU time x264 leaves; a live one's at
    /// normal priority, so it keeps up under load. Either way the thread carries its name.
    func testTheThreadRunsAtThePriorityItIsGiven() throws {
        for (priority, policy) in [(NamedThread.Priority.normal, ThreadView.schedOther), (.idle, ThreadView.schedIdle)] {
            let seen = Promise<ThreadView>()
            let t = AudioEncoderThread(channels: 1, capacityFrames: 16, priority: priority) { _ in seen.fulfill(ThreadView.current()) }
            t.start()
            t.submitSilence(frames: 1)
            try t.close()
            let view = seen.wait(until: SystemClock.now())
            XCTAssertEqual(view?.comm, "reel-aac")
            XCTAssertEqual(view?.policy, policy, "\(priority)")
        }
    }
}

/// What the consumer saw, by the target it was given.
/// @unchecked Sendable: `target` is written by the test thread only while the consumer is
/// quiesced or not started; `counts` is read by it only then too (quiesce/close order them).
private final class TargetBox: @unchecked Sendable {
    var target = 0
    private(set) var counts = [0, 0]
    func consumed(_ frames: Int) { counts[target] += frames }
}
