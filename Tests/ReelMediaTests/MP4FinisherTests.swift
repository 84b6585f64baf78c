import Foundation
import XCTest
import ReelCore
@testable import ReelMedia

/// MP4Finisher, checked from the outside: the boxes by a walker of this file's own (not the
/// finisher's parser), the packets by ffprobe, decoding by FFmpeg and GStreamer.
final class MP4FinisherTests: XCTestCase {
    func testFinished30fps48kMono() throws { try checkFinish(fps: Rational(30), rate: 48000, channels: 1) }
    func testFinished15fps44kStereo() throws { try checkFinish(fps: Rational(15), rate: 44100, channels: 2) }

    func checkFinish(fps: Rational, rate: Int, channels: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let path = tempPath("finish-\(fps.num)fps-\(rate).mp4"), fragmented = path + ".fragmented"
        let written = try writeTestFile(path: path, fps: fps, rate: rate, channels: channels, seconds: 4)
        XCTAssertTrue(written.videoPackets.contains { $0.pts != $0.dts }, "B-frames in the test file", file: file, line: line)
        try FileManager.default.copyItem(atPath: path, toPath: fragmented)
        let r = try MP4Finisher.finish(path: path)
        XCTAssertFalse(r.alreadyFinished, file: file, line: line)
        XCTAssertEqual(r.lastStep, .mdat, file: file, line: line)

        try assertStandardLayout(path, file: file, line: line)
        assertSamePackets(try packets(path), try packets(fragmented), lastAudioDuration: written.audioPackets.last!.duration, file: file, line: line)
        XCTAssertEqual(try startTimes(path), ["video": "0.000000", "audio": "0.000000"], file: file, line: line)
        // Durations from the moov (the fragmented file has none but what FFmpeg sums up reading it all).
        let s = try probe(path, ["-show_entries", "stream=codec_type,duration:format=duration"])
        let durations = Dictionary(uniqueKeysWithValues: (s["streams"] as! [[String: Any]]).map { ($0["codec_type"] as! String, Double($0["duration"] as! String)!) })
        XCTAssertEqual(durations["video"], 4.0, "video: 4 s", file: file, line: line)
        XCTAssertEqual(durations["audio"] ?? 0, 4.0, accuracy: 1024.0 / Double(rate), "audio: 4 s", file: file, line: line)
        XCTAssertEqual(Double((s["format"] as! [String: Any])["duration"] as! String)!, 4.0, accuracy: 1024.0 / Double(rate), file: file, line: line)
        try assertDecodesClean(path, file: file, line: line)
        try assertGStreamerSameFrames(path, fragmented, rate: rate, channels: channels, file: file, line: line)

        // Finishing again changes nothing.
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertTrue(try MP4Finisher.finish(path: path).alreadyFinished, file: file, line: line)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), before, file: file, line: line)
    }

    /// Stopped after each step (as a crash there leaves it), the file plays with every packet;
    /// finishing it again (what start-up recovery does) gives the finished file.
    func testStoppedAfterEachStepPlaysAndFinishesOnRerun() throws {
        let path = tempPath("steps.mp4")
        try writeTestFile(path: path, fps: Rational(30), rate: 48000, channels: 1, seconds: 3)
        let all = try packets(path)
        let reference = path + ".finished"
        try FileManager.default.copyItem(atPath: path, toPath: reference)
        try MP4Finisher.finish(path: reference)
        let finishedBytes = try Data(contentsOf: URL(fileURLWithPath: reference))
        for step in MP4Finisher.Step.allCases {
            let p = tempPath("steps-\(step).mp4")
            try FileManager.default.copyItem(atPath: path, toPath: p)
            let r = try MP4Finisher.finish(path: p, stopAfter: step)
            XCTAssertEqual(r.lastStep, step)
            try assertDecodesClean(p)
            XCTAssertEqual(try packets(p), step == .mdat ? try packets(reference) : all, "stopped after \(step)")
            try MP4Finisher.finish(path: p)
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: p)), finishedBytes, "finished again after \(step)")
        }
    }

    /// A crash mid-recording leaves a fragment cut short: the finisher drops it, as recovery does.
    func testFileCutShortIsFinishedToItsLastCompleteFragment() throws {
        let path = tempPath("cut.mp4")
        try writeTestFile(path: path, fps: Rational(30), rate: 48000, channels: 1, seconds: 4)
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int64
        XCTAssertEqual(truncate(path, off_t(size - 500)), 0)
        // What it should keep: the fragments before the one cut short (FFmpeg also shows that one's samples).
        let d = try Data(contentsOf: URL(fileURLWithPath: path))
        let lastMoof = try topLevelBoxes(d).last { $0.type == "moof" }!.offset
        let fragmented = path + ".fragmented"
        try d.prefix(lastMoof).write(to: URL(fileURLWithPath: fragmented))
        try MP4Finisher.finish(path: path)
        try assertStandardLayout(path)
        try assertDecodesClean(path)
        assertSamePackets(try packets(path), try packets(fragmented), lastAudioDuration: 1024)
    }

    /// A file written before the placeholder existed is left exactly as it was, with a clear error.
    func testFileWithoutPlaceholderIsLeftAlone() throws {
        let path = tempPath("old.mp4")
        try writeTestFile(path: path, fps: Rational(30), rate: 48000, channels: 1, seconds: 2)
        var d = try Data(contentsOf: URL(fileURLWithPath: path))
        let ftypSize = Int(d[0]) << 24 | Int(d[1]) << 16 | Int(d[2]) << 8 | Int(d[3])
        d.removeSubrange(ftypSize..<(ftypSize + 16))        // the old layout: ftyp, moov, fragments
        try d.write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try MP4Finisher.finish(path: path)) {
            let m = ($0 as? MediaError)?.message ?? ""
            XCTAssertTrue(m.contains("no 16-byte placeholder box after ftyp"), m)
            XCTAssertTrue(m.contains("it stays a fragmented MP4"), m)
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), d)
    }

    /// Past 4 GiB (a sparse hole: the finisher never reads media): co64 and a 64-bit mdat, and
    /// FFmpeg reads every packet from beyond the hole.
    func testOver4GiBUsesCo64() throws {
        let small = tempPath("big-src.mp4")
        try writeTestFile(path: small, fps: Rational(30), rate: 48000, channels: 1, seconds: 3)
        let d = try Data(contentsOf: URL(fileURLWithPath: small))
        // Splice a 4.5 GiB top-level free box (a hole) between the moov and the first moof.
        let firstMoof = try topLevelBoxes(d).first { $0.type == "moof" }!.offset
        let path = tempPath("big.mp4")
        let hole: Int64 = 4_500_000_000
        FileManager.default.createFile(atPath: path, contents: nil)
        let h = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try h.write(contentsOf: d.prefix(firstMoof))
        var free = Data([0, 0, 0, 1]) + Data("free".utf8)
        for i in (0..<8).reversed() { free.append(UInt8(truncatingIfNeeded: hole >> (8 * i))) }
        try h.write(contentsOf: free)
        try h.seek(toOffset: UInt64(Int64(firstMoof) + hole))
        try h.write(contentsOf: d.suffix(from: firstMoof))
        try h.close()
        defer { unlink(path) }

        let r = try MP4Finisher.finish(path: path)
        XCTAssertGreaterThan(r.moovOffset, Int64(UInt32.max))
        try assertStandardLayout(path)
        let layout = try walk(path)
        XCTAssertEqual(layout.mdatHeaderLength, 16, "a 64-bit mdat header")
        XCTAssertTrue(layout.moovBoxes.contains("co64"), "\(layout.moovBoxes)")
        XCTAssertFalse(layout.moovBoxes.contains("stco"), "\(layout.moovBoxes)")
        try MP4Finisher.finish(path: small)
        XCTAssertEqual(try packets(path), try packets(small), "the same packets as the same file finished without the hole")
    }

    /// Durations past 32 bits (here a movie timescale of 2e9, so 4 s is 8e9 ticks): version-1 mvhd,
    /// tkhd and elst, read back with every packet as in the same file finished with 90 kHz.
    func testLongDurationsUseVersion1Headers() throws {
        let path = tempPath("v1.mp4"), reference = path + ".reference"
        try writeTestFile(path: path, fps: Rational(30), rate: 48000, channels: 1, seconds: 4)
        try FileManager.default.copyItem(atPath: path, toPath: reference)
        try MP4Finisher.finish(path: reference)
        var d = try Data(contentsOf: URL(fileURLWithPath: path))
        let moov = try topLevelBoxes(d).first { $0.type == "moov" }!.offset
        let mvhd = try XCTUnwrap(d.range(of: Data("mvhd".utf8), in: moov..<(moov + 64))).lowerBound
        XCTAssertEqual(d[mvhd + 4], 0, "the writer's mvhd is version 0")
        let ts = mvhd + 4 + 12
        XCTAssertEqual(d[ts..<(ts + 4)].reduce(0) { $0 << 8 | Int($1) }, 90_000)
        d.replaceSubrange(ts..<(ts + 4), with: [0x77, 0x35, 0x94, 0x00])   // 2_000_000_000
        try d.write(to: URL(fileURLWithPath: path))
        try MP4Finisher.finish(path: path)
        let l = try walk(path)
        XCTAssertEqual(l.versions["mvhd"], [1], "\(l.versions)")
        XCTAssertEqual(l.versions["tkhd"], [1, 1], "\(l.versions)")
        XCTAssertEqual(l.versions["elst"], [1, 1], "\(l.versions)")
        XCTAssertEqual(l.versions["mdhd"], [0, 0], "media durations still fit 32 bits: \(l.versions)")
        XCTAssertEqual(try packets(path), try packets(reference))
        let f = try probe(path, ["-show_entries", "format=duration"])["format"] as! [String: Any]
        XCTAssertEqual(Double(f["duration"] as! String)!, 4.0, accuracy: 0.03)
        try assertDecodesClean(path)
    }

    // MARK: - Independent checks

    struct Layout { var top: [String] = []; var mdatHeaderLength = 0; var moovBoxes: [String] = []; var versions: [String: [UInt8]] = [:] }

    /// Top-level boxes and every box type inside moov, read with this test's own walker.
    func walk(_ path: String) throws -> Layout {
        let h = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? h.close() }
        let size = try h.seekToEnd()
        var layout = Layout()
        var o: UInt64 = 0
        func be(_ b: Data) -> UInt64 { b.reduce(0) { $0 << 8 | UInt64($1) } }
        while o + 8 <= size {
            try h.seek(toOffset: o)
            let head = try h.read(upToCount: 16) ?? Data()
            var n = be(head.prefix(4)), hl: UInt64 = 8
            let type = String(decoding: head[4..<8], as: UTF8.self)
            if n == 1 { n = be(head[8..<16]); hl = 16 }
            guard n >= hl, o + n <= size else { layout.top.append("\(type)(cut)"); break }
            layout.top.append(type)
            if type == "mdat" { layout.mdatHeaderLength = Int(hl) }
            if type == "moov" {
                try h.seek(toOffset: o)
                let m = [UInt8](try h.read(upToCount: Int(n)) ?? Data())
                func inner(_ a: Int, _ b: Int) {
                    var p = a
                    while p + 8 <= b {
                        let s = Int(m[p]) << 24 | Int(m[p + 1]) << 16 | Int(m[p + 2]) << 8 | Int(m[p + 3])
                        let t = String(decoding: m[(p + 4)..<(p + 8)], as: UTF8.self)
                        guard s >= 8, p + s <= b else { return }
                        layout.moovBoxes.append(t)
                        if ["mvhd", "tkhd", "mdhd", "elst"].contains(t) { layout.versions[t, default: []].append(m[p + 8]) }
                        if ["trak", "mdia", "minf", "stbl", "edts", "mvex"].contains(t) { inner(p + 8, p + s) }
                        p += s
                    }
                }
                inner(8, m.count)
            }
            o += n
        }
        return layout
    }

    func assertStandardLayout(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let l = try walk(path)
        XCTAssertEqual(l.top.filter { $0 != "free" }, ["ftyp", "mdat", "moov"], file: file, line: line)
        XCTAssertFalse(l.moovBoxes.contains("mvex"), "\(l.moovBoxes)", file: file, line: line)
        XCTAssertFalse(l.moovBoxes.contains("trex"), file: file, line: line)
        for t in ["stts", "stsz", "stsc", "stsd", "elst"] {
            XCTAssertEqual(l.moovBoxes.filter { $0 == t }.count, 2, "\(t) per track: \(l.moovBoxes)", file: file, line: line)
        }
        XCTAssertEqual(l.moovBoxes.filter { $0 == "stco" || $0 == "co64" }.count, 2, file: file, line: line)
        XCTAssertEqual(l.moovBoxes.filter { $0 == "stss" }.count, 1, "video only: \(l.moovBoxes)", file: file, line: line)
        XCTAssertEqual(l.moovBoxes.filter { $0 == "ctts" }.count, 1, "video (B-frames) only: \(l.moovBoxes)", file: file, line: line)
    }

    func topLevelBoxes(_ d: Data) throws -> [(type: String, offset: Int)] {
        var out: [(type: String, offset: Int)] = []
        var o = 0
        while o + 8 <= d.count {
            let n = Int(d[o]) << 24 | Int(d[o + 1]) << 16 | Int(d[o + 2]) << 8 | Int(d[o + 3])
            out.append((String(decoding: d[(o + 4)..<(o + 8)], as: UTF8.self), o))
            guard n >= 8 else { break }
            o += n
        }
        return out
    }

    /// Every packet as ffprobe shows it: "stream pts dts duration flags hash".
    func packets(_ path: String) throws -> [String] {
        let r = try shell(["ffprobe", "-v", "error", "-show_data_hash", "crc32", "-show_entries",
                           "packet=stream_index,pts,dts,duration,flags,data_hash", "-of", "json", path])
        guard r.status == 0 else { throw MediaError("ffprobe failed on \(path): \(r.err)") }
        let p = (try JSONSerialization.jsonObject(with: r.out) as! [String: Any])["packets"] as! [[String: Any]]
        XCTAssertGreaterThan(p.count, 50)
        return p.map { k in
            ["stream_index", "pts", "dts", "duration", "flags", "data_hash"].map { k[$0].map { "\($0)" } ?? "none" }.joined(separator: " ")
        }
    }

    /// The finished file's packets against the fragmented file's: equal, but for what FFmpeg 5.1 reads
    /// differently in a fragmented file: there it shows the priming packet as a plain packet (its edit
    /// list applied as an offset, start_time -0.021) and the last audio packet with a whole frame's
    /// duration; in the finished file the edit list marks the priming discarded ("KD") and the last
    /// packet has the duration the muxer wrote (`lastAudioDuration`).
    func assertSamePackets(_ finished: [String], _ fragmented: [String], lastAudioDuration: Int64,
                           file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(finished.count, fragmented.count, file: file, line: line)
        var expected = fragmented
        if let first = expected.firstIndex(where: { $0.hasPrefix("1 ") }) {
            var f = expected[first].split(separator: " ").map(String.init)
            XCTAssertEqual(f[1], "-1024", "the priming packet", file: file, line: line)
            f[4] = "KD"; expected[first] = f.joined(separator: " ")
        }
        if let last = expected.lastIndex(where: { $0.hasPrefix("1 ") }) {
            var f = expected[last].split(separator: " ").map(String.init)
            f[3] = "\(lastAudioDuration)"; expected[last] = f.joined(separator: " ")
        }
        XCTAssertEqual(finished, expected, file: file, line: line)
        for (i, (a, b)) in zip(finished, expected).enumerated() where a != b {
            XCTFail("packet \(i): \(a) vs \(b)", file: file, line: line); break
        }
    }

    func startTimes(_ path: String) throws -> [String: String] {
        let s = try probe(path, ["-show_entries", "stream=codec_type,start_time"])["streams"] as! [[String: Any]]
        return Dictionary(uniqueKeysWithValues: s.map { ($0["codec_type"] as! String, $0["start_time"] as! String) })
    }

    func assertDecodesClean(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        XCTAssertEqual(null.status, 0, path, file: file, line: line)
        XCTAssertEqual(null.err, "", path, file: file, line: line)
    }

    /// GStreamer's qtdemux does not read the finished file as fragmented (no moof/trun parsed, which
    /// it does for the fragmented one) and decodes as many video frames and audio frames as FFmpeg.
    func assertGStreamerSameFrames(_ finished: String, _ fragmented: String, rate: Int, channels: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        func gst(_ path: String, _ branch: String) throws -> (buffers: Int, log: String) {
            let r = try shell(["env", "GST_DEBUG=qtdemux:5", "GST_DEBUG_NO_COLOR=1", "gst-launch-1.0", "-v", "filesrc", "location=\(path)",
                               "!", "qtdemux", "name=d", "d.\(branch)_0", "!", "queue", "!", "decodebin", "!",
                               "identity", "name=counter", "silent=false", "!", "fakesink", "sync=false"])
            XCTAssertEqual(r.status, 0, "gst-launch on \(path): \(r.err.suffix(2000))", file: file, line: line)
            let n = String(decoding: r.out, as: UTF8.self).split(separator: "\n").filter { $0.contains("counter") && $0.contains("chain") }.count
            return (n, r.err)
        }
        func ffmpegFrames(_ path: String, _ type: String) throws -> Int {
            let s = try probe(path, ["-count_frames", "-show_entries", "stream=codec_type,nb_read_frames"])["streams"] as! [[String: Any]]
            return Int(s.first { $0["codec_type"] as? String == type }?["nb_read_frames"] as? String ?? "") ?? -1
        }
        let g = try gst(finished, "video")
        XCTAssertGreaterThan(g.buffers, 20, file: file, line: line)
        XCTAssertEqual(g.buffers, try ffmpegFrames(finished, "video"), "video frames decoded by GStreamer and FFmpeg", file: file, line: line)
        XCTAssertEqual(g.buffers, try ffmpegFrames(fragmented, "video"), "every video frame of the fragmented file", file: file, line: line)
        XCTAssertFalse(g.log.contains("qtdemux_parse_trun"), "qtdemux read the finished file as fragmented", file: file, line: line)
        XCTAssertFalse(try gst(finished, "audio").log.contains("qtdemux_parse_trun"), file: file, line: line)
        XCTAssertTrue(try gst(fragmented, "video").log.contains("qtdemux_parse_trun"), "the check sees a fragmented file", file: file, line: line)
        // The same audio samples: both apply the edit list (the priming hidden), GStreamer by clipping.
        let raw = tempPath("gst.s16")
        let r = try shell(["gst-launch-1.0", "-q", "filesrc", "location=\(finished)", "!", "qtdemux", "name=d", "d.audio_0", "!", "queue", "!",
                           "decodebin", "!", "audioconvert", "!", "audio/x-raw,format=S16LE", "!", "filesink", "location=\(raw)"])
        XCTAssertEqual(r.status, 0, r.err, file: file, line: line)
        let gstPCM = try Data(contentsOf: URL(fileURLWithPath: raw))
        let ffPCM = try shell(["ffmpeg", "-v", "error", "-i", finished, "-map", "0:a", "-f", "s16le", "-acodec", "pcm_s16le", "-"]).out
        XCTAssertGreaterThan(ffPCM.count, 100_000, file: file, line: line)
        // FFmpeg keeps the last packet's padding, GStreamer trims at the edit's end: lengths within a frame.
        XCTAssertLessThanOrEqual(abs(gstPCM.count - ffPCM.count), 1024 * 2 * channels, "audio decoded by GStreamer and FFmpeg", file: file, line: line)
        func onset(_ pcm: Data) -> Int? {
            let samples = pcm.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
            return stride(from: 0, to: samples.count, by: channels).first { abs(Int(samples[$0])) > 8000 }.map { $0 / channels }
        }
        let ffOnset = try XCTUnwrap(onset(ffPCM), file: file, line: line)
        // (GStreamer clips the priming by time in ns: at 44.1 kHz that may round to the next sample.)
        let gstOnset = try XCTUnwrap(onset(gstPCM), file: file, line: line)
        XCTAssertLessThanOrEqual(abs(gstOnset - ffOnset), 1, "the beep at the same sample in GStreamer and FFmpeg", file: file, line: line)
        XCTAssertLessThanOrEqual(abs(ffOnset - rate), rate / 500, "the beep at 1.000 s (sample \(ffOnset))", file: file, line: line)
    }
}
