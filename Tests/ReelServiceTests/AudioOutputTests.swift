import XCTest
import ReelTestSupport
import ReelCore
import ReelMedia
@testable import ReelPipeline

/// An encoder that keeps the PCM it is given and "encodes" it as packets of `frameSize` frames
/// whose bytes are that PCM, at packet times counted from 0 (no priming): what reaches the file
/// is then exactly the PCM the output gave, so a test can read the file's sound back.
private final class RecordingEncoder: AudioEncoding {
    let frameSize: Int
    let channels: Int
    private(set) var given: [Int16] = []
    private var pending: [Int16] = []
    private var next: Int64 = 0
    init(frameSize: Int = 1024, channels: Int) { self.frameSize = frameSize; self.channels = channels }

    func encode(interleaved: UnsafeBufferPointer<Int16>, _ emit: (Packet) throws -> Void) throws {
        given.append(contentsOf: interleaved)
        pending.append(contentsOf: interleaved)
        while pending.count >= frameSize * channels {
            try out(frameSize, emit)
        }
    }

    func flush(_ emit: (Packet) throws -> Void) throws {
        if !pending.isEmpty { try out(pending.count / channels, emit) }
    }

    private func out(_ frames: Int, _ emit: (Packet) throws -> Void) throws {
        let body = Array(pending.prefix(frames * channels))
        pending.removeFirst(frames * channels)
        try body.withUnsafeBytes { try emit(Packet(data: $0, pts: next, dts: next, duration: Int64(frames), isKeyframe: true)) }
        next += Int64(frames)
    }
}

/// The file's audio as the writer keeps it: packets in file time, cut back by an undo as
/// `MP4Writer.rollback` does (every packet reaching past the take's boundary, which leads the
/// take's first sample by `lead`, goes).
private final class FakeFile {
    let channels: Int
    init(channels: Int) { self.channels = channels }
    var packets: [(pts: Int64, samples: [Int16])] = []
    func write(_ p: Packet) {
        packets.append((p.pts, Array(p.data.bindMemory(to: Int16.self))))
    }
    /// Cuts back for a take whose audio began at output sample `start`; returns where the audio continues.
    func rollBack(start: Int64, lead: Int64, channels: Int) -> Int64 {
        let keep = packets.prefix { $0.pts + Int64($0.samples.count / channels) <= start - lead }
        packets = Array(keep)
        return packets.last.map { $0.pts + Int64($0.samples.count / channels) } ?? 0
    }
    var pcm: [Int16] {
        var out: [Int16] = []
        var at: Int64 = 0
        for p in packets {
            guard p.pts == at else {
                XCTFail("packets in the file leave a gap or overlap at \(at) (next at \(p.pts); packets at \(packets.map(\.pts)))")
                return []
            }
            out += p.samples
            at += Int64(p.samples.count / channels)
        }
        return out
    }
}


final class AudioOutputTests: XCTestCase {
    let rate = 48000

    /// A continuous 347 Hz tone (off every frame-rate multiple), source sample `i` of channel `c`.
    func tone(_ n: Int, channels: Int, from: Int = 0) -> [Int16] {
        var out = [Int16]()
        out.reserveCapacity(n * channels)
        for i in from..<(from + n) {
            let v = Int16((12000 * _sin(2 * Double.pi * 347 * Double(i) / Double(rate))).rounded())
            for c in 0..<channels { out.append(c == 0 ? v : v / 2) }
        }
        return out
    }

    /// Drives one AudioOutput; `encoders` are those it was given and made, `file` what it wrote.
    private final class Rig {
        private final class Made { var list: [RecordingEncoder] = [] }
        let output: AudioOutput
        let file: FakeFile
        private let made = Made()
        var encoders: [RecordingEncoder] { made.list }
        let channels: Int
        init(channels: Int, rate: Int) {
            let file = FakeFile(channels: channels), made = self.made
            self.file = file
            let first = RecordingEncoder(channels: channels)
            made.list.append(first)
            self.channels = channels
            output = AudioOutput(channels: channels, sampleRate: rate, encoder: first,
                                 makeEncoder: { let e = RecordingEncoder(channels: channels); made.list.append(e); return e },
                                 write: { file.write($0) })
        }
        func keep(_ s: ArraySlice<Int16>) throws { try Array(s).withUnsafeBufferPointer { try output.consume(.keep($0)) } }
        func drop(_ s: ArraySlice<Int16>) throws { try Array(s).withUnsafeBufferPointer { try output.consume(.drop($0)) } }
        func command(_ c: AudioCommand) throws { try output.consume(.command(c)) }
        /// Runs of `s` in pieces of random sizes (so no result may depend on how the audio is chunked).
        func feed(_ s: [Int16], keep: Bool, rng: inout SplitMix64) throws {
            var i = 0
            while i < s.count / channels {
                let n = min(s.count / channels - i, 1 + Int(rng.next() % 700))
                let piece = s[(i * channels)..<((i + n) * channels)]
                if keep { try self.keep(piece) } else { try drop(piece) }
                i += n
            }
        }
    }

    /// The oracle: the output with each join's window replaced by `JoinCrossfade.mix` of the raw
    /// source around the outgoing cut and around the incoming resume.
    func expected(source: [Int16], kept spans: [Range<Int>], channels: Int) -> [Int16] {
        let fade = JoinCrossfade(sampleRate: rate, channels: channels)
        let h = fade.half
        var out: [Int16] = []
        for s in spans { out += source[(s.lowerBound * channels)..<(s.upperBound * channels)] }
        var j = 0
        for k in 1..<max(1, spans.count) {
            j += spans[k - 1].count
            let cut = spans[k - 1].upperBound, resume = spans[k].lowerBound
            let o = Array(source[((cut - h) * channels)..<((cut + h) * channels)])
            let i = Array(source[((resume - h) * channels)..<((resume + h) * channels)])
            var m = [Int16](repeating: 0, count: fade.frames * channels)
            o.withUnsafeBufferPointer { ob in i.withUnsafeBufferPointer { ib in m.withUnsafeMutableBufferPointer { fade.mix(outgoing: ob, incoming: ib, into: $0) } } }
            out.replaceSubrange(((j - h) * channels)..<((j + h) * channels), with: m)
        }
        return out
    }

    /// Takes of a tone with pauses between: the encoder is given exactly the oracle's output (every
    /// sample position kept, each join's window mixed), however the runs are chunked; the tone's
    /// second difference across each join stays within 3 times its level elsewhere.
    func testEveryJoinIsTheCrossfadeOfTheSourceAroundItsCuts() throws {
        for channels in [1, 2] {
            var rng = SplitMix64(seed: UInt64(7 + channels))
            let source = tone(rate * 2, channels: channels)
            let spans = [0..<20_000, 31_111..<52_000, 52_100..<60_000, 70_001..<90_000]
            let rig = Rig(channels: channels, rate: rate)
            var at = 0
            for (n, s) in spans.enumerated() {
                if s.lowerBound > at { try rig.feed(Array(source[(at * channels)..<(s.lowerBound * channels)]), keep: false, rng: &rng) }
                try rig.command(.beginTake(number: n + 1, start: Int64(rig.output.produced)))
                try rig.feed(Array(source[(s.lowerBound * channels)..<(s.upperBound * channels)]), keep: true, rng: &rng)
                at = s.upperBound
            }
            try rig.feed(Array(source[(at * channels)..<((at + 3000) * channels)]), keep: false, rng: &rng)  // stopped while paused
            try rig.command(.finish)
            let want = expected(source: source, kept: spans, channels: channels)
            let got = rig.encoders[0].given
            XCTAssertEqual(got.count, want.count, "no sample added or removed")
            XCTAssertEqual(got, want, "\(channels) channel(s)")
            XCTAssertEqual(rig.file.pcm, want, "what reaches the file")
            // The join is inaudible as a click: the second difference near each join against elsewhere.
            let ch0 = stride(from: 0, to: got.count, by: channels).map { Int(got[$0]) }
            let d2 = Self.secondDifference(ch0)
            var joins: [Int] = []
            var j = 0
            for s in spans.dropLast() { j += s.count; joins.append(j) }
            let near = joins.flatMap { (($0 - 480)..<($0 + 480)) }
            let elsewhere = d2.indices.filter { i in joins.allSatisfy { abs(i - $0) > 960 } }.map { d2[$0] }.sorted()
            let p999 = elsewhere[elsewhere.count * 999 / 1000]
            let worst = near.map { d2[$0 - 1] }.max()!
            XCTAssertLessThanOrEqual(worst, 3 * p999, "second difference at the joins \(worst) against \(p999) elsewhere")
        }
    }

    /// |x[i+1] − 2x[i] + x[i−1]| at i = 1 ..< count − 1 (index i − 1 in the result).
    static func secondDifference(_ x: [Int]) -> [Int] {
        var d = [Int](repeating: 0, count: max(0, x.count - 2))
        for i in 1..<max(1, x.count - 1) { d[i - 1] = abs(x[i + 1] - 2 * x[i] + x[i - 1]) }
        return d
    }

    /// Without a crossfade the same cuts make a click of 100 times the tone's second difference: the
    /// measure above can fail.
    func testTheMeasureSeesAHardCut() {
        let source = tone(rate, channels: 1)
        let cut = Array(source[0..<20_000]) + Array(source[31_111..<40_000])
        let d2 = Self.secondDifference(cut.map { Int($0) })
        var elsewhere: [Int] = []
        for (i, v) in d2.enumerated() where abs(i - 20_000) > 960 { elsewhere.append(v) }
        elsewhere.sort()
        XCTAssertGreaterThan(d2[19_998...20_001].max()!, 3 * elsewhere[elsewhere.count * 999 / 1000])
    }

    /// Pauses and takes shorter than half the window, silence, and a cut before any output: the
    /// output keeps every position, and chunking never changes a sample.
    func testShortPausesAndTakesKeepEveryPositionWhateverTheChunks() throws {
        let source = tone(20_000, channels: 2)
        let ops: [(keep: Bool, frames: Int)] = [(false, 50), (true, 3000), (false, 7), (true, 30), (false, 200), (true, 5),
                                                (false, 1), (true, 4000), (false, 500), (true, 2)]
        var outputs: [[Int16]] = []
        for seed in 1...6 {
            var rng = SplitMix64(seed: UInt64(seed))
            let rig = Rig(channels: 2, rate: rate)
            var at = 0, kept = 0
            for op in ops {
                try rig.feed(Array(source[(at * 2)..<((at + op.frames) * 2)]), keep: op.keep, rng: &rng)
                if op.keep { kept += op.frames }
                at += op.frames
            }
            try rig.output.consume(.silence(100))
            try rig.command(.finish)
            XCTAssertEqual(rig.encoders[0].given.count, (kept + 100) * 2)
            outputs.append(rig.encoders[0].given)
        }
        XCTAssertTrue(outputs.allSatisfy { $0 == outputs[0] }, "the same output whatever the chunking")
    }

    /// An undo (while recording, and while paused) leaves the file exactly as if the undone take
    /// had never come: the re-primed encoder is fed from one packet before the first packet the
    /// file lost, and the next take's join is mixed with the outgoing side anew.
    func testAnUndoneTakeLeavesTheFileAsIfItHadNeverBeen() throws {
        for whilePaused in [false, true] {
            let ch = 2
            let source = tone(rate * 2, channels: ch)
            var rng = SplitMix64(seed: whilePaused ? 11 : 12)
            func slice(_ r: Range<Int>) -> [Int16] { Array(source[(r.lowerBound * ch)..<(r.upperBound * ch)]) }
            // With the undo: take 1, pause, take 2 (undone), pause, take 2 again.
            let rig = Rig(channels: ch, rate: rate)
            let lead = Int64(rig.output.fade.half) + 1024
            try rig.command(.beginTake(number: 1, start: 0))
            try rig.feed(slice(0..<20_000), keep: true, rng: &rng)
            try rig.feed(slice(20_000..<30_000), keep: false, rng: &rng)
            try rig.command(.beginTake(number: 2, start: 20_000))
            try rig.feed(slice(30_000..<41_000), keep: true, rng: &rng)
            if whilePaused { try rig.feed(slice(41_000..<45_000), keep: false, rng: &rng) }
            let resume = rig.file.rollBack(start: 20_000, lead: lead, channels: ch)
            try rig.command(.rollBack(take: 2, resume: resume, to: 20_000))
            try rig.feed(slice((whilePaused ? 45_000 : 41_000)..<50_000), keep: false, rng: &rng)
            try rig.command(.beginTake(number: 2, start: 20_000))
            try rig.feed(slice(50_000..<70_000), keep: true, rng: &rng)
            try rig.command(.finish)
            XCTAssertEqual(rig.encoders.count, 2, "one fresh encoder for the undo")
            XCTAssertEqual(rig.file.pcm, expected(source: source, kept: [0..<20_000, 50_000..<70_000], channels: ch),
                           "undo while \(whilePaused ? "paused" : "recording")")
        }
    }

    /// Silence filled in for samples a device lost (an overrun) is kept in place: the tail before
    /// it fades out and the source after it fades in, so neither edge clicks; every position and
    /// every sample away from the edges is unchanged.
    func testADeviceGapFadesOutAndIn() throws {
        var rng = SplitMix64(seed: 5)
        let source = tone(40_000, channels: 1)
        let rig = Rig(channels: 1, rate: rate)
        let h = rig.output.fade.half
        try rig.command(.beginTake(number: 1, start: 0))
        try rig.feed(Array(source[0..<15_000]), keep: true, rng: &rng)
        let zeros = [Int16](repeating: 0, count: 3000)
        try zeros.withUnsafeBufferPointer { try rig.output.consume(.gap(UnsafeBufferPointer(rebasing: $0[0..<1000]))) }
        try zeros.withUnsafeBufferPointer { try rig.output.consume(.gap(UnsafeBufferPointer(rebasing: $0[1000..<3000]))) }
        try rig.feed(Array(source[18_000..<40_000]), keep: true, rng: &rng)
        try rig.command(.finish)
        let got = rig.encoders[0].given.map { Int($0) }
        XCTAssertEqual(got.count, 40_000, "no sample added or removed")
        XCTAssertEqual(Array(got[0..<(15_000 - h)]), source[0..<(15_000 - h)].map { Int($0) }, "untouched before the fade")
        XCTAssertTrue(got[15_000..<18_000].allSatisfy { $0 == 0 }, "the gap stays silent")
        XCTAssertEqual(Array(got[(18_000 + h)...]), source[(18_000 + h)...].map { Int($0) }, "untouched after the fade")
        let d2 = Self.secondDifference(got)
        var elsewhere: [Int] = []
        for (i, v) in d2.enumerated() where abs(i - 15_000) > 960 && abs(i - 18_000) > 960 && i < 36_000 && i > 1000 { elsewhere.append(v) }
        elsewhere.sort()
        let p999 = elsewhere[elsewhere.count * 999 / 1000]
        for edge in [15_000, 18_000] {
            let worst = d2[(edge - 480)..<(edge + 480)].max()!
            let at = d2[(edge - 480)..<(edge + 480)].firstIndex(of: worst)!
            XCTAssertLessThanOrEqual(worst, 3 * p999, "second difference at the gap's edge \(edge): \(worst) at \(at) against \(p999) elsewhere; around it \(Array(got[(at - 3)...(at + 3)]))")
        }
        // Without the fades the edges are hard steps: the measure sees them.
        let hard = Array(source[0..<15_000].map { Int($0) }) + [Int](repeating: 0, count: 3000) + source[18_000..<40_000].map { Int($0) }
        XCTAssertGreaterThan(Self.secondDifference(hard)[(15_000 - 480)..<(15_000 + 480)].max()!, 3 * p999)
    }

    /// Every take undone: the output starts again at 0 with a fresh encoder, and no join is mixed
    /// with what came before.
    func testUndoOfTakeOneStartsAgain() throws {
        let source = tone(30_000, channels: 1)
        let rig = Rig(channels: 1, rate: rate)
        try rig.command(.beginTake(number: 1, start: 0))
        try rig.keep(source[0..<10_000])
        rig.file.packets.removeAll()
        try rig.command(.rollBack(take: 1, resume: nil, to: 0))
        try rig.drop(source[10_000..<12_000])
        try rig.command(.beginTake(number: 1, start: 0))
        try rig.keep(source[12_000..<30_000])
        try rig.command(.finish)
        XCTAssertEqual(rig.file.pcm, Array(source[12_000..<30_000]))
    }
}
