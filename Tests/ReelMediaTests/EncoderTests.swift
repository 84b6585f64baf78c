import XCTest
import ReelCore
@testable import ReelMedia

final class EncoderTests: XCTestCase {
    func message(_ body: () throws -> Void) -> String {
        do { try body(); return "no error" } catch let e as MediaError { return e.message } catch { return "not a MediaError: \(error)" }
    }

    func testBadSettingsAreClearErrors() {
        var s = H264Settings(); s.preset = "fastt"
        XCTAssertEqual(message { _ = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: s) },
                       "cannot open x264 encoder: unknown preset 'fastt' (valid: ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, veryslow, placebo)")
        s = H264Settings(); s.profile = "hihg"
        XCTAssertEqual(message { _ = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: s) },
                       "cannot open x264 encoder: unknown profile 'hihg' (valid: baseline, main, high, high10, high422, high444)")
        s = H264Settings(); s.tune = "filmm"
        XCTAssertTrue(message { _ = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: s) }
                       .hasPrefix("cannot open x264 encoder: unknown tune 'filmm' (valid: film, animation"))
        XCTAssertEqual(message { _ = try H264Encoder(width: 641, height: 480, fps: Rational(30), settings: H264Settings()) },
                       "cannot open x264 encoder: size 641x480 is not positive and even; yuv420p needs even width and height")
        XCTAssertTrue(message { _ = try AACEncoder(format: AudioFormat(sampleRate: 12345, channels: 1), settings: AACSettings()) }
                       .hasPrefix("cannot open AAC encoder: sample rate 12345 Hz is not an AAC rate (valid: 96000"))
    }

    func testH264PacketsAndHeaders() throws {
        let enc = try H264Encoder(width: 64, height: 48, fps: Rational(30000, 1001), settings: H264Settings())
        XCTAssertEqual(enc.frameDuration, 3003)
        let avcC = enc.extradata
        XCTAssertEqual(avcC[0], 1); XCTAssertEqual(avcC[1], 100, "High profile"); XCTAssertEqual(avcC[4], 0xFF, "4-byte NAL lengths")
        let y = [UInt8](repeating: 16, count: 64 * 48), c = [UInt8](repeating: 128, count: 32 * 24)
        var out: [(pts: Int64, dts: Int64, key: Bool)] = []
        let collect: (Packet) throws -> Void = { p in
            // Every packet is a sequence of length-prefixed NAL units filling it exactly.
            var o = 0
            while o < p.data.count { o += 4 + (Int(p.data[o]) << 24 | Int(p.data[o + 1]) << 16 | Int(p.data[o + 2]) << 8 | Int(p.data[o + 3])) }
            XCTAssertEqual(o, p.data.count)
            out.append((p.pts, p.dts, p.isKeyframe))
        }
        try y.withUnsafeBufferPointer { y in try c.withUnsafeBufferPointer { c in
            let f = I420Frame(y: y.baseAddress!, u: c.baseAddress!, v: c.baseAddress!, strideY: 64, strideU: 32, strideV: 32, width: 64, height: 48)
            for n in 0..<Int64(70) { try enc.encode(f, pts: n * 3003, collect) }
            XCTAssertThrowsError(try enc.encode(f, pts: 69 * 3003, collect), "pts must increase")
        } }
        try enc.flush(collect)
        XCTAssertEqual(out.count, 70)
        XCTAssertEqual(out.map(\.pts).sorted(), (0..<70).map { $0 * 3003 })
        XCTAssertTrue(zip(out, out.dropFirst()).allSatisfy { $0.dts < $1.dts })
        XCTAssertLessThanOrEqual(out[0].dts, 0, "B-frame delay shows as non-positive first dts")
        XCTAssertEqual(out.filter(\.key).map(\.pts), [0, 60 * 3003], "a keyframe every 2 s (60 frames at 29.97)")
    }

    func testAACTimestampsCountSamples() throws {
        let enc = try AACEncoder(format: AudioFormat(sampleRate: 44100, channels: 2), settings: AACSettings())
        XCTAssertEqual(enc.initialPadding, 1024)
        XCTAssertEqual(enc.timeBase, Rational(1, 44100))
        XCTAssertEqual(enc.extradata.first.map { $0 >> 3 }, 2, "AudioSpecificConfig object type 2 = AAC LC")
        var packets: [(pts: Int64, duration: Int64)] = []
        let total = 44100 + 333   // not a multiple of 1024, fed in odd-sized chunks
        let pcm = [Int16](repeating: 1000, count: 2 * 777)
        var fed = 0
        while fed < total {
            let n = min(777, total - fed)
            try pcm.withUnsafeBufferPointer { try enc.encode(interleaved: UnsafeBufferPointer(rebasing: $0[0..<2 * n])) { packets.append(($0.pts, $0.duration)) } }
            fed += n
        }
        try enc.flush { packets.append(($0.pts, $0.duration)) }
        XCTAssertEqual(packets.first?.pts, -1024, "priming precedes input sample 0")
        XCTAssertTrue(zip(packets, packets.dropFirst()).allSatisfy { $0.pts + $0.duration == $1.pts }, "contiguous")
        XCTAssertEqual(packets.last.map { $0.pts + $0.duration }, Int64(total), "ends exactly at the last input sample")
    }
}
