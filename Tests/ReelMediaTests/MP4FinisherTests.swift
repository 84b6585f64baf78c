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

    /// One damaged box in the middle (the second moof's type flipped, or the first mdat saying
    /// 8 bytes so its media reads as boxes): refused, naming the box and its offset, and the file
    /// left byte for byte as it was, not cut there nor finished without a fragment.
    func testDamagedBoxInTheMiddleIsRefusedAndTheFileLeftAsItWas() throws {
        let path = tempPath("middle.mp4")
        try writeTestFile(path: path, fps: Rational(30), rate: 48000, channels: 1, seconds: 3)
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        let boxes = try topLevelBoxes(original)
        let moofs = boxes.filter { $0.type == "moof" }.map(\.offset)
        let firstMdat = boxes.first { $0.type == "mdat" }!.offset
        XCTAssertGreaterThan(moofs.count, 3)
        var renamed = original
        renamed.replaceSubrange((moofs[1] + 4)..<(moofs[1] + 8), with: Array("moog".utf8))
        var short = original
        short.replaceSubrange(firstMdat..<(firstMdat + 4), with: [0, 0, 0, 8])
        for (name, d, expected) in [("renamed", renamed, "moog at offset \(moofs[1]) "), ("short mdat", short, " at offset ")] {
            try d.write(to: URL(fileURLWithPath: path))
            XCTAssertThrowsError(try MP4Finisher.finish(path: path), name) {
                XCTAssertTrue("\($0)".contains(expected), "\(name): \($0)")
                XCTAssertTrue("\($0)".hasSuffix("(the file is damaged; it is left as it was)"), "\(name): \($0)")
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), d, "\(name): the file was changed")
        }
    }

    /// A file whose tables would take more than the memory budget is refused as soon as the
    /// fragments read so far need more, before the finisher takes more, and left as it was.
    func testFileOverTheMemoryBudgetIsRefusedAndLeftAsItWas() throws {
        let path = tempPath("budget.mp4")
        try writeTestFile(path: path, fps: Rational(30), rate: 48000, channels: 1, seconds: 3)
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try MP4Finisher.finish(path: path, memoryBudget: 4 << 10)) {
            let e = $0 as? MP4FinishError
            XCTAssertEqual(e?.kind, .unsupported, "\($0)")
            XCTAssertEqual(e?.box, "moof", "\($0)")
            XCTAssertTrue("\($0)".contains("more than the finisher's 4 KiB"), "\($0)")
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), original)
        XCTAssertGreaterThan(try MP4Finisher.finish(path: path).samples, 100, "the default budget holds it")
    }

    /// A file written before the placeholder existed is left exactly as it was, with a clear error.
    func testFileWithoutPlaceholderIsLeftAlone() throws {
        let path = tempPath("old.mp4")
        try writeTestFile(path: path, fps: Rational(30), rate: 48000, channels: 1, seconds: 2)
        var d = try Data(contentsOf: URL(fileURLWithPath: path))
        let ftypSize = Int(d[0]) << 24 | Int(d[1]) << 16 | Int(d[2]) << 8 | Int(d[3])
        // The old layout: ftyp, moov, fragments (no placeholder, and so no signature after it).
        d.removeSubrange(ftypSize..<(ftypSize + 16 + PartSignature.box.count))
        try d.write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try MP4Finisher.finish(path: path)) {
            let e = $0 as? MP4FinishError
            XCTAssertEqual(e?.kind, .unsupported)
            XCTAssertEqual(e?.box, "moov")
            XCTAssertEqual(e?.offset, Int64(ftypSize))
            let m = e?.description ?? "\($0)"
            XCTAssertTrue(m.contains("is not the 16-byte placeholder box Reel writes after ftyp"), m)
            XCTAssertTrue(m.hasSuffix("(it is left as it was)"), m)
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
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil), path)
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

    // MARK: - Chapters

    /// A 4 s file at 30 fps with takes beginning at these frames (index, label), as the pipeline
    /// begins them: right after the frame went to the encoder, at its pts (1/90000). `early`: a
    /// take begun this many frames before its first frame (as x264's lookahead does in the pipeline).
    @discardableResult
    func writeTakes(_ path: String, _ takes: [Int64: (index: Int, label: String?)], early: Int64 = 0) throws -> (MP4Writer, Written) {
        var writer: MP4Writer?
        let w = try writeTestFile(path: path, fps: Rational(30), rate: 48000, channels: 1, seconds: 4, afterFrame: { n, mp4 in
            writer = mp4
            for (k, t) in takes.sorted(by: { $0.key < $1.key }) where k - early == n || (n == 0 && k < early) {
                try mp4.beginTake(index: t.index, label: t.label, start: k * 3000)
            }
        })
        return (writer!, w)
    }

    struct Chapter: Equatable { var start: Int64; var end: Int64; var title: String }

    /// The chapters as ffprobe 5.1 reads them, in 1/90000 (it reads the text track's times, over chpl's).
    func chapters(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws -> [Chapter] {
        let c = try probe(path, ["-show_chapters"])["chapters"] as! [[String: Any]]
        for x in c { XCTAssertEqual(x["time_base"] as? String, "1/90000", file: file, line: line) }
        return c.map { Chapter(start: Int64($0["start"] as! Int), end: Int64($0["end"] as! Int),
                               title: ($0["tags"] as? [String: Any])?["title"] as? String ?? "") }
    }

    /// The boxes in `d[range]` (this test's own walker): type and body range.
    func boxes(_ d: [UInt8], _ r: Range<Int>) -> [(type: String, body: Range<Int>)] {
        var out: [(type: String, body: Range<Int>)] = [], o = r.lowerBound
        while o + 8 <= r.upperBound {
            var n = Int(be32(d, o)), h = 8
            if n == 1 { n = Int(be32(d, o + 8)) << 32 | Int(be32(d, o + 12)); h = 16 }
            guard n >= h, o + n <= r.upperBound else { break }
            out.append((String(decoding: d[(o + 4)..<(o + 8)], as: UTF8.self), (o + h)..<(o + n)))
            o += n
        }
        return out
    }
    func be32(_ d: [UInt8], _ o: Int) -> UInt32 { d[o..<(o + 4)].reduce(0) { $0 << 8 | UInt32($1) } }
    func find(_ d: [UInt8], _ r: Range<Int>, _ path: [String]) -> Range<Int>? {
        guard let first = path.first else { return r }
        guard let b = boxes(d, r).first(where: { $0.type == first }) else { return nil }
        return find(d, b.body, Array(path.dropFirst()))
    }

    /// Three takes: a QuickTime chapter track and a Nero chpl, read back by ffprobe to the tick,
    /// by this test's own walker (the text samples where stco says, the references, next_track_ID),
    /// and by GStreamer (which decodes the same frames as without chapters).
    func testTakeMarkersBecomeChapters() throws {
        let path = tempPath("chapters.mp4"), fragmented = path + ".fragmented"
        let written = try writeTakes(path, [0: (1, nil), 45: (2, "zwei é"), 90: (3, nil)]).1
        try FileManager.default.copyItem(atPath: path, toPath: fragmented)
        XCTAssertEqual(try chapters(fragmented), [], "the fragmented file has no chapters")
        let r = try MP4Finisher.finish(path: path)
        XCTAssertEqual(r.chapters, 3)
        XCTAssertEqual(r.warnings, [])
        XCTAssertEqual(try chapters(path), [Chapter(start: 0, end: 135_000, title: "Take 1"),
                                            Chapter(start: 135_000, end: 270_000, title: "zwei é"),
                                            Chapter(start: 270_000, end: 360_000, title: "Take 3")])
        XCTAssertEqual(try startTimes(path)["video"], "0.000000")
        XCTAssertEqual(try startTimes(path)["audio"], "0.000000")
        assertSamePackets(try packets(path), try packets(fragmented), lastAudioDuration: written.audioPackets.last!.duration)
        try assertDecodesClean(path)
        try assertGStreamerSameFrames(path, fragmented, rate: 48000, channels: 1)

        let d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let top = boxes(d, 0..<d.count)
        XCTAssertEqual(top.map(\.type), ["ftyp", "mdat", "moov"])
        let moov = top[2].body
        let traks = boxes(d, moov).filter { $0.type == "trak" }
        XCTAssertEqual(traks.count, 3)
        let mvhd = find(d, moov, ["mvhd"])!
        XCTAssertEqual(be32(d, mvhd.upperBound - 4), 4, "next_track_ID past the chapter track (3)")
        let text = traks[2].body
        let tkhd = find(d, text, ["tkhd"])!
        XCTAssertEqual(be32(d, tkhd.lowerBound) & 0xff_ffff, 0, "chapter track disabled")
        XCTAssertEqual(be32(d, tkhd.lowerBound + 12), 3, "track id 3")
        XCTAssertEqual(String(decoding: d[(find(d, text, ["mdia", "hdlr"])!.lowerBound + 8)...].prefix(4), as: UTF8.self), "text")
        XCTAssertEqual(be32(d, find(d, text, ["mdia", "mdhd"])!.lowerBound + 12), 90_000, "the video's media timescale")
        XCTAssertEqual(Array(d[find(d, traks[0].body, ["tref", "chap"])!]), [0, 0, 0, 3], "the video track refers to the chapter track")
        XCTAssertNil(find(d, traks[1].body, ["tref"]), "the audio track does not")
        // The samples where stco says: length, title, encd (UTF-8).
        let stbl = find(d, text, ["mdia", "minf", "stbl"])!
        var at = Int(be32(d, find(d, stbl, ["stco"])!.lowerBound + 8))
        XCTAssertGreaterThan(at, top[1].body.lowerBound); XCTAssertLessThan(at, top[1].body.upperBound, "inside the mdat")
        let stsz = find(d, stbl, ["stsz"])!
        XCTAssertEqual(be32(d, stsz.lowerBound + 8), 3)
        for (i, title) in ["Take 1", "zwei é", "Take 3"].enumerated() {
            let size = Int(be32(d, stsz.lowerBound + 12 + 4 * i)), t = Array(title.utf8)
            XCTAssertEqual(Array(d[at..<(at + size)]), [0, UInt8(t.count)] + t + [0, 0, 0, 12] + Array("encd".utf8) + [0, 0, 1, 0])
            at += size
        }
        // chpl: version 1, 3 chapters, starts in 100 ns.
        let chpl = Array(d[find(d, moov, ["udta", "chpl"])!])
        XCTAssertEqual(Array(chpl.prefix(9)), [1, 0, 0, 0, 0, 0, 0, 0, 3])
        var p = 9, starts: [Int64] = [], titles: [String] = []
        while p < chpl.count {
            starts.append(chpl[p..<(p + 8)].reduce(Int64(0)) { $0 << 8 | Int64($1) })
            let n = Int(chpl[p + 8]); titles.append(String(decoding: chpl[(p + 9)..<(p + 9 + n)], as: UTF8.self)); p += 9 + n
        }
        XCTAssertEqual(starts, [0, 15_000_000, 30_000_000])
        XCTAssertEqual(titles, ["Take 1", "zwei é", "Take 3"])

        // Finishing again changes nothing; stopped after any step and finished again, the same bytes.
        XCTAssertTrue(try MP4Finisher.finish(path: path).alreadyFinished)
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))), d)
        for step in MP4Finisher.Step.allCases {
            let q = tempPath("chapters-\(step).mp4")
            try FileManager.default.copyItem(atPath: fragmented, toPath: q)
            try MP4Finisher.finish(path: q, stopAfter: step)
            try assertDecodesClean(q)
            try MP4Finisher.finish(path: q)
            XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: q))), d, "finished again after \(step)")
        }
    }

    /// A damaged marker (here an unknown version) is skipped with a warning: its take has no
    /// chapter, the one before runs on to the next. A damaged first marker leaves an untitled
    /// chapter from 0, so the chapters still cover the file. A `free` box without the signature is
    /// no marker.
    func testDamagedMarkerIsSkipped() throws {
        let path = tempPath("damaged.mp4")
        let w = try writeTakes(path, [0: (1, nil), 45: (2, nil), 90: (3, nil)]).0
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func damaged(_ take: Int) throws -> (MP4Finisher.Result, [Chapter]) {
            var d = original
            let o = Int(w.takeMarkers.first { $0.index == take }!.fileOffset)
            d[o + 16] = 9                                      // the version byte
            let p = tempPath("damaged-\(take).mp4")
            try Data(d).write(to: URL(fileURLWithPath: p))
            let r = try MP4Finisher.finish(path: p)
            try assertDecodesClean(p)
            return (r, try chapters(p))
        }
        let (r2, c2) = try damaged(2)
        XCTAssertEqual(r2.chapters, 2)
        guard r2.warnings.count == 1 else { return XCTFail("\(r2.warnings)") }
        XCTAssertTrue(r2.warnings[0].contains("skipped the take marker at offset \(w.takeMarkers[1].fileOffset)") && r2.warnings[0].contains("version 9"), r2.warnings[0])
        XCTAssertEqual(c2, [Chapter(start: 0, end: 270_000, title: "Take 1"), Chapter(start: 270_000, end: 360_000, title: "Take 3")])
        let (r1, c1) = try damaged(1)
        XCTAssertEqual(r1.warnings.count, 1)
        XCTAssertEqual(c1, [Chapter(start: 0, end: 135_000, title: ""), Chapter(start: 135_000, end: 270_000, title: "Take 2"),
                            Chapter(start: 270_000, end: 360_000, title: "Take 3")])

        // Not a marker: a plain free box (as other tools write) where a marker would be.
        var d = original
        let o = Int(w.takeMarkers[1].fileOffset)
        d[o + 8] = UInt8(ascii: "X")                           // "XeelTake": no signature
        let p = tempPath("plain-free.mp4")
        try Data(d).write(to: URL(fileURLWithPath: p))
        let r = try MP4Finisher.finish(path: p)
        XCTAssertEqual(r.warnings, [])
        XCTAssertEqual(try chapters(p).map(\.title), ["Take 1", "Take 3"])
    }

    /// A `.part` cut (a crash) just after a take's marker, before any fragment of that take (its
    /// first frame still in the encoder's lookahead): it finishes, that take has no chapter (it
    /// would start at or after the end), and the last chapter ends where the video ends.
    func testMarkerPastTheLastCompleteFragment() throws {
        let path = tempPath("cut-after-marker.mp4")
        let w = try writeTakes(path, [0: (1, nil), 45: (2, nil), 90: (3, nil)], early: 25).0
        let m3 = Int(w.takeMarkers.first { $0.index == 3 }!.fileOffset)
        var d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let markerEnd = m3 + Int(be32(d, m3))
        XCTAssertEqual(String(decoding: d[(markerEnd + 4)..<(markerEnd + 8)], as: UTF8.self), "moof")
        d = Array(d[..<(markerEnd + 100)])                     // and 100 bytes of the next moof
        try Data(d).write(to: URL(fileURLWithPath: path))
        let r = try MP4Finisher.finish(path: path)
        XCTAssertEqual(r.chapters, 2)
        try assertDecodesClean(path)
        let c = try chapters(path)
        // Where the video ends: its last frame's pts plus one frame, from the packets themselves.
        let v = try probe(path, ["-select_streams", "v", "-show_entries", "packet=pts,duration"])["packets"] as! [[String: Any]]
        let videoEnd = v.map { Int64($0["pts"] as! Int) + Int64($0["duration"] as! Int) }.max()!
        XCTAssertLessThan(videoEnd, 270_000, "take 3 has no frame in the file")
        XCTAssertEqual(c, [Chapter(start: 0, end: 135_000, title: "Take 1"), Chapter(start: 135_000, end: videoEnd, title: "Take 2")])
        // The marker of take 3 is kept (inside the mdat): issue 13's undo cuts back to such offsets.
        let f = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        XCTAssertEqual(Array(f[(m3 + 4)..<(m3 + 16)]), Array("freeReelTake".utf8))
    }

    /// Without video the chapter clock is the audio track's (samples): takes at output samples 0
    /// and 48000 are chapters at exactly those samples, the last ending where the audio ends.
    func testAudioOnlyChaptersCountSamples() throws {
        let path = tempPath("audio-chapters.mp4")
        let aenc = try AACEncoder(format: AudioFormat(sampleRate: 48000, channels: 1), settings: AACSettings())
        let mp4 = try MP4Writer(path: path, video: nil, audio: aenc)
        let pcm = [Int16](repeating: 100, count: 960)
        for i in 0..<150 {   // 3 s
            if i == 0 { try mp4.beginTake(index: 1, label: nil, start: 0) }
            if i == 50 { try mp4.beginTake(index: 2, label: nil, start: 48000) }
            try pcm.withUnsafeBufferPointer { try aenc.encode(interleaved: $0) { try mp4.writeAudio($0) } }
        }
        try aenc.flush { try mp4.writeAudio($0) }
        try mp4.finish()
        XCTAssertEqual(try MP4Finisher.finish(path: path).chapters, 2)
        let c = try probe(path, ["-show_chapters"])["chapters"] as! [[String: Any]]
        XCTAssertEqual(c.map { $0["time_base"] as? String }, ["1/48000", "1/48000"])
        XCTAssertEqual(c.map { $0["start"] as? Int }, [0, 48000])
        XCTAssertEqual(c.map { $0["end"] as? Int }, [48000, 144_000])
        XCTAssertEqual(c.map { ($0["tags"] as? [String: Any])?["title"] as? String }, ["Take 1", "Take 2"])
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
