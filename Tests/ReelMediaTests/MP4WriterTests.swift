import Foundation
import XCTest
import ReelCore
@testable import ReelMedia

final class MP4WriterTests: XCTestCase {
    func testAlignment48kMono30fps() throws { try checkFile(fps: Rational(30), rate: 48000, channels: 1) }
    func testAlignment44kStereo30fps() throws { try checkFile(fps: Rational(30), rate: 44100, channels: 2) }
    func testAlignment48kMono15fps() throws { try checkFile(fps: Rational(15), rate: 48000, channels: 1) }
    func testAlignment44kStereo15fps() throws { try checkFile(fps: Rational(15), rate: 44100, channels: 2) }

    /// Writes 3 s (white frame and tone onset at exactly 1 s), then checks the file as players see it.
    func checkFile(fps: Rational, rate: Int, channels: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let (width, height) = (320, 240)
        let path = tempPath("align-\(fps.num)fps-\(rate).mp4")
        let written = try writeTestFile(path: path, width: width, height: height, fps: fps, rate: rate, channels: channels, seconds: 3)
        let frameTicks = rescale(90_000, fps.den, fps.num)
        XCTAssertEqual(written.dtsFixes, 0, file: file, line: line)

        // Stream facts.
        let streams = try probe(path, ["-show_entries", "stream=codec_type,codec_name,profile,pix_fmt,time_base,start_pts,sample_rate,channels"])["streams"] as! [[String: Any]]
        let v = try XCTUnwrap(streams.first { $0["codec_type"] as? String == "video" })
        let a = try XCTUnwrap(streams.first { $0["codec_type"] as? String == "audio" })
        XCTAssertEqual(v["codec_name"] as? String, "h264", file: file, line: line)
        XCTAssertEqual(v["profile"] as? String, "High", file: file, line: line)
        XCTAssertEqual(v["pix_fmt"] as? String, "yuv420p", file: file, line: line)
        XCTAssertEqual(v["time_base"] as? String, "1/90000", file: file, line: line)
        XCTAssertEqual(v["start_pts"] as? Int, 0, "video starts at time 0", file: file, line: line)
        XCTAssertEqual(a["codec_name"] as? String, "aac", file: file, line: line)
        XCTAssertEqual(a["profile"] as? String, "LC", file: file, line: line)
        XCTAssertEqual(a["sample_rate"] as? String, "\(rate)", file: file, line: line)
        XCTAssertEqual(a["channels"] as? Int, channels, file: file, line: line)
        // FFmpeg 5.1 applies a fragmented file's edit list as a plain time offset, so it shows exactly the
        // priming packet before 0 (a spec player skips it via the edit list; checked below).
        XCTAssertEqual(a["start_pts"] as? Int, -1024, "audio: only the priming lies before time 0", file: file, line: line)

        // Edit lists: video starts at its first frame's composition time, audio after the 1024 priming samples.
        let firstVideo = try XCTUnwrap(written.videoPackets.first)
        XCTAssertEqual(try editListMediaTimes(path), ["vide": [firstVideo.pts - firstVideo.dts], "soun": [1024]], file: file, line: line)

        // Decodes clean.
        let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        XCTAssertEqual(null.status, 0, file: file, line: line)
        XCTAssertEqual(null.err, "", file: file, line: line)

        // Video packets: one frame apart, strictly increasing DTS.
        let vpk = (try probe(path, ["-select_streams", "v", "-show_entries", "packet=pts,dts,duration", "-show_packets"])["packets"] as! [[String: Any]])
        let pts = vpk.map { Int64($0["pts"] as! Int) }.sorted(), dts = vpk.map { Int64($0["dts"] as! Int) }
        XCTAssertEqual(pts.count, Int(3 * fps.num / fps.den), file: file, line: line)
        XCTAssertEqual(pts, (0..<Int64(pts.count)).map { $0 * frameTicks }, "pts step by exactly one frame from 0", file: file, line: line)
        XCTAssertTrue(zip(dts, dts.dropFirst()).allSatisfy { $0 < $1 }, "dts strictly increasing", file: file, line: line)
        XCTAssertEqual(written.videoPackets.map(\.dts), dts, "file holds the encoder's dts unchanged", file: file, line: line)

        // Audio duration matches video duration within one AAC frame.
        let apk = (try probe(path, ["-select_streams", "a", "-show_entries", "packet=pts,duration", "-show_packets"])["packets"] as! [[String: Any]])
        let audioEnd = apk.map { Int64($0["pts"] as! Int) + Int64($0["duration"] as! Int) }.max()!
        let videoEnd = pts.last! + frameTicks
        let audioEndNs = rescale(audioEnd, nanosPerSecond, Int64(rate)), videoEndNs = rescale(videoEnd, nanosPerSecond, 90_000)
        XCTAssertLessThanOrEqual(Swift.abs(audioEndNs - videoEndNs), rescale(1024, nanosPerSecond, Int64(rate)), file: file, line: line)

        // The white frame's presentation time (frame pts from ffprobe, luma from a raw gray decode).
        let framePts = (try probe(path, ["-select_streams", "v", "-show_entries", "frame=pts", "-show_frames"])["frames"] as! [[String: Any]]).map { Int64($0["pts"] as! Int) }
        let gray = try shell(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "gray", "-"])
        XCTAssertEqual(gray.out.count, framePts.count * width * height, file: file, line: line)
        let whites = (0..<framePts.count).filter { i in
            let plane = gray.out[(i * width * height)..<((i + 1) * width * height)]
            return plane.reduce(0) { $0 + Int($1) } / plane.count > 128
        }
        XCTAssertEqual(whites.count, 1, file: file, line: line)
        let whiteNs = rescale(framePts[whites[0]], nanosPerSecond, 90_000)
        XCTAssertEqual(whiteNs, nanosPerSecond, "white frame presented at exactly 1.000 s", file: file, line: line)

        // The tone onset's presentation time: decoded samples start at the stream's first pts.
        let pcm = try shell(["ffmpeg", "-v", "error", "-i", path, "-map", "0:a", "-f", "s16le", "-acodec", "pcm_s16le", "-"])
        let samples = pcm.out.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        let onsetIndex = try XCTUnwrap(stride(from: 0, to: samples.count, by: channels).first { abs(Int(samples[$0])) > 8000 }) / channels
        let onsetNs = rescale(-1024 + Int64(onsetIndex), nanosPerSecond, Int64(rate))
        XCTAssertLessThanOrEqual(Swift.abs(onsetNs - nanosPerSecond), 2_000_000, "tone onset at 1.000 s (got \(onsetNs) ns)", file: file, line: line)
        XCTAssertLessThanOrEqual(Swift.abs(onsetNs - whiteNs), 2_000_000, "A/V agree within 2 ms", file: file, line: line)
    }

    /// A recording that dies at 5 s: the file on disk at that moment plays, with at least 3.5 s of video.
    /// And `finish()` only appends: the bytes on disk before it are a prefix of the final file.
    func testCrashCopyPlaysAndFinishOnlyAppends() throws {
        let path = tempPath("crash.mp4"), crashCopy = path + ".crash", preFinish = path + ".prefinish"
        var crashBytes = Int64(0)
        // x264's delay grows by a frame per thread; pin the count x264 picks on 2 cores so the margin
        // (1 s fragment + ~0.47 s encoder delay < 1.5 s) does not depend on the test machine.
        var h264 = H264Settings(); h264.threads = 3
        try writeTestFile(path: path, fps: Rational(30), h264: h264, rate: 48000, channels: 1, seconds: 7, afterFrame: { n, mp4 in
            if n == 5 * 30 - 1 {   // the 5 s of input have been fed
                try FileManager.default.copyItem(atPath: path, toPath: crashCopy)
                crashBytes = mp4.bytesWritten
            }
        }, beforeFinish: { _ in try FileManager.default.copyItem(atPath: path, toPath: preFinish) })

        let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", crashCopy, "-f", "null", "-"])
        XCTAssertEqual(null.status, 0)
        XCTAssertEqual(null.err, "")
        let counted = try probe(crashCopy, ["-count_frames", "-show_entries", "stream=codec_type,nb_read_frames"])["streams"] as! [[String: Any]]
        let frames = Int(try XCTUnwrap(counted.first { $0["codec_type"] as? String == "video" }?["nb_read_frames"] as? String))!
        XCTAssertGreaterThanOrEqual(frames, 105, "at least 3.5 s of video survived (got \(frames) frames)")
        let audioFrames = Int(try XCTUnwrap(counted.first { $0["codec_type"] as? String == "audio" }?["nb_read_frames"] as? String))!
        XCTAssertGreaterThanOrEqual(audioFrames * 1024, 48000 * 7 / 2, "at least 3.5 s of audio survived")
        let copySize = try FileManager.default.attributesOfItem(atPath: crashCopy)[.size] as! Int
        XCTAssertEqual(Int64(copySize), crashBytes, "everything written so far was flushed to the file")

        let before = try Data(contentsOf: URL(fileURLWithPath: preFinish)), after = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertGreaterThan(after.count, before.count)
        XCTAssertEqual(after.prefix(before.count), before, "finish() appended only; nothing before it was rewritten")
    }

    /// No fragment ends with a hole in the video (x264 sends B-frames after the frame that follows
    /// them), so a file cut back after a failed write, or recovered after a crash, at any fragment
    /// plays every frame to its end; its audio covers all of that video (AAC comes out at once,
    /// x264 a lookahead late, so the audio runs past the video and is kept). The first fragment
    /// goes out as soon as both tracks have data.
    func testNoFragmentEndsWithAHoleInTheVideo() throws {
        for fps in [Rational(15), Rational(30)] {
            let path = tempPath("prefix-\(fps.num)fps.mp4")
            var prefixes: [(bytes: Data, afterFrame: Int64)] = []
            var seen: Int64 = 0
            try writeTestFile(path: path, fps: fps, rate: 48000, channels: 1, seconds: 6, afterFrame: { n, mp4 in
                guard mp4.completeBytes > seen else { return }
                seen = mp4.completeBytes
                let h = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
                defer { try? h.close() }
                prefixes.append((try XCTUnwrap(h.read(upToCount: Int(seen))), n))
            })
            XCTAssertGreaterThanOrEqual(prefixes.count, 5, "\(fps.num) fps: one early, then one a second (less x264's delay)")
            let frameTicks = rescale(90_000, fps.den, fps.num), aacFrameNs = rescale(1024, nanosPerSecond, 48000)
            for (i, (bytes, n)) in prefixes.enumerated() {
                let p = tempPath("prefix-\(fps.num)fps-\(i).mp4")
                try bytes.write(to: URL(fileURLWithPath: p))
                let what = "\(fps.num) fps, cut after fragment \(i) (\(bytes.count) bytes, \(n + 1) frames in)"
                let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", p, "-f", "null", "-"])
                XCTAssertEqual(null.status, 0, what); XCTAssertEqual(null.err, "", what)
                let vpk = try probe(p, ["-select_streams", "v", "-show_entries", "packet=pts", "-show_packets"])["packets"] as! [[String: Any]]
                let pts = vpk.map { Int64($0["pts"] as! Int) }.sorted()
                XCTAssertFalse(pts.isEmpty, what)
                if pts != (0..<Int64(pts.count)).map({ $0 * frameTicks }) { XCTFail("\(what): a hole in the video, pts \(pts.suffix(6))") }
                let apk = try probe(p, ["-select_streams", "a", "-show_entries", "packet=pts,duration", "-show_packets"])["packets"] as! [[String: Any]]
                let audioEnd = try XCTUnwrap(apk.compactMap { d in (d["duration"] as? Int).map { Int64(d["pts"] as! Int) + Int64($0) } }.max(), what)
                let videoEndNs = rescale((pts.last ?? 0) + frameTicks, nanosPerSecond, 90_000)
                let audioEndNs = rescale(audioEnd, nanosPerSecond, 48000)
                XCTAssertGreaterThanOrEqual(audioEndNs, videoEndNs - aacFrameNs, "\(what): the audio covers the video")
            }
            // x264's lookahead holds the first frames; the first fragment follows its second output packet.
            XCTAssertLessThanOrEqual(try XCTUnwrap(prefixes.first).afterFrame, 40, "\(fps.num) fps: first fragment late")
        }
    }

    /// Frames dropped before the encoder (a pipeline behind the camera) leave gaps in x264's dts.
    /// A fragment's last sample takes its duration from its packet and the next fragment starts
    /// where the durations sum to, so with x264's nominal one-frame durations a gap just before a
    /// cut moved every later frame a frame early: the systemd VM test's file ended with two frames
    /// at one pts (`ffmpeg -xerror`: "non monotonically increasing dts"). Every frame must keep its pts.
    func testDroppedFramesKeepEveryPtsAcrossFragments() throws {
        var seed: UInt64 = 2026
        for trial in 0..<12 {
            let path = tempPath("gaps-\(trial).mp4")
            let venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: H264Settings())
            let aenc = try AACEncoder(format: AudioFormat(sampleRate: 48000, channels: 1), settings: AACSettings())
            let mp4 = try MP4Writer(path: path, video: venc, audio: aenc, fragmentMicros: 500_000)
            let c = [UInt8](repeating: 128, count: 32 * 32), pcm = [Int16](repeating: 100, count: 1600)
            var y = [UInt8](repeating: 0, count: 64 * 64)
            var given: [Int64] = []
            for n in 0..<Int64(270) {
                try pcm.withUnsafeBufferPointer { try aenc.encode(interleaved: $0) { try mp4.writeAudio($0) } }
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                if (seed >> 33) % 2 == 0 { continue }              // half the frames dropped, at random
                for i in y.indices { y[i] = UInt8(16 + (Int(n) * 7 + i) % 200) }
                try y.withUnsafeBufferPointer { y in
                    try c.withUnsafeBufferPointer { c in
                        let f = I420Frame(y: y.baseAddress!, u: c.baseAddress!, v: c.baseAddress!,
                                          strideY: 64, strideU: 32, strideV: 32, width: 64, height: 64)
                        try venc.encode(f, pts: n * 3000) { try mp4.writeVideo($0) }
                    }
                }
                given.append(n * 3000)
            }
            try venc.flush { try mp4.writeVideo($0) }
            try aenc.flush { try mp4.writeAudio($0) }
            try mp4.finish()
            let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
            XCTAssertEqual(null.status, 0, "trial \(trial)"); XCTAssertEqual(null.err, "", "trial \(trial)")
            let vpk = try probe(path, ["-select_streams", "v", "-show_entries", "packet=pts", "-show_packets"])["packets"] as! [[String: Any]]
            XCTAssertEqual(vpk.map { Int64($0["pts"] as! Int) }.sorted(), given, "trial \(trial): the pts given to x264")
        }
    }

    /// The writer's file has the shape of a recovered one: ftyp, the 16-byte placeholder (a `free`
    /// box, MP4Finisher's future mdat header), Reel's signature (a `free` box: "ReelPart", version
    /// 1), moov, then moof/mdat pairs to the end, no mfra (libavformat would keep its index in
    /// memory for the whole recording).
    func testWrittenFileIsFragmentsOnly() throws {
        let path = tempPath("shape.mp4")
        _ = try writeTestFile(path: path, fps: Rational(30), rate: 48000, channels: 1, seconds: 3)
        let types = try topLevelBoxTypes(path)
        XCTAssertEqual(Array(types.prefix(4)), ["ftyp", "free", "free", "moov"], "\(types)")
        let d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let ftypSize = Int(d[0]) << 24 | Int(d[1]) << 16 | Int(d[2]) << 8 | Int(d[3])
        XCTAssertEqual(Array(d[ftypSize..<(ftypSize + 16)]), MP4Writer.placeholder, "the placeholder follows ftyp")
        XCTAssertEqual(Array(d[(ftypSize + 16)..<(ftypSize + 33)]), [0, 0, 0, 17] + Array("freeReelPart".utf8) + [1], "the signature follows it")
        let rest = Array(types.dropFirst(4))
        XCTAssertGreaterThanOrEqual(rest.count, 2 * 3, "a fragment per second of media: \(types)")
        XCTAssertEqual(rest.count % 2, 0, "\(types)")
        for (i, t) in rest.enumerated() { XCTAssertEqual(t, i % 2 == 0 ? "moof" : "mdat", "box \(i + 4) of \(types)") }
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
        XCTAssertGreaterThan(size, 0)
    }

    /// Take markers: each a `free` box right after a fragment's mdat (or at the very end, for a take
    /// begun after the last cut), where `takeMarkers` says, holding the take's index, start (in the
    /// video track's 1/90000) and label; with them cut out the file is byte for byte the one written
    /// without them, and ffprobe reads the same packets.
    func testTakeMarkersSitBetweenFragmentsAndChangeNothingElse() throws {
        let plain = tempPath("no-takes.mp4"), path = tempPath("takes.mp4")
        try writeTestFile(path: plain, fps: Rational(30), rate: 48000, channels: 1, seconds: 4)
        let takes: [Int64: (index: Int, label: String?)] = [0: (1, nil), 45: (2, "zwei é"), 90: (3, nil), 119: (4, nil)]
        var writer: MP4Writer?
        try writeTestFile(path: path, fps: Rational(30), rate: 48000, channels: 1, seconds: 4, afterFrame: { n, mp4 in
            writer = mp4
            if let t = takes[n] {
                try mp4.beginTake(index: t.index, label: t.label, start: n * 3000)
                try mp4.beginAudioTake(index: t.index, label: t.label, sample: n * 1600)
            }
        })
        let d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func u32(_ o: Int) -> Int { Int(d[o]) << 24 | Int(d[o + 1]) << 16 | Int(d[o + 2]) << 8 | Int(d[o + 3]) }
        var boxes: [(type: String, offset: Int, size: Int)] = []
        var o = 0
        while o + 8 <= d.count { boxes.append((String(decoding: d[(o + 4)..<(o + 8)], as: UTF8.self), o, u32(o))); o += u32(o) }
        XCTAssertEqual(o, d.count)
        let markers = boxes.enumerated().filter { $0.element.type == "free" && $0.offset > 2 }  // after the placeholder and signature
        XCTAssertEqual(markers.map(\.element.offset), writer!.takeMarkers.map { Int($0.fileOffset) })
        XCTAssertEqual(writer!.takeMarkers.map(\.index), [1, 2, 3, 4])
        for (i, m) in markers {
            XCTAssertEqual(boxes[i - 1].type, "mdat", "marker \(i) follows a fragment")
            XCTAssertTrue(i + 1 == boxes.count || boxes[i + 1].type == "moof", "marker \(i) comes before the next fragment")
            let body = Array(d[(m.offset + 8)..<(m.offset + m.size)])
            XCTAssertEqual(Array(body.prefix(9)), Array("ReelTake".utf8) + [1])
            let index = body[9..<13].reduce(0) { $0 << 8 | Int($1) }, start = body[13..<21].reduce(Int64(0)) { $0 << 8 | Int64($1) }
            let n = takes.first { $0.value.index == index }!.key
            XCTAssertEqual(start, n * 3000, "take \(index) starts at its frame's pts in 1/90000")
            XCTAssertEqual(String(decoding: body[21...], as: UTF8.self), takes[n]!.label ?? "")

        }
        // Each take from the second starts a fragment (its clean cut), so the boxes differ from the
        // file written without takes; the packets do not (ffprobe lists them in file order: sorted).
        func packets(_ p: String) throws -> String {
            String(decoding: try shell(["ffprobe", "-v", "error", "-show_data_hash", "crc32", "-show_entries",
                                        "packet=stream_index,pts,dts,duration,flags,data_hash", "-of", "csv", p]).out, as: UTF8.self)
                .split(separator: "\n").sorted().joined(separator: "\n")
        }
        XCTAssertEqual(try packets(path), try packets(plain))
        XCTAssertGreaterThan(try packets(path).split(separator: "\n").count, 200)
    }

    /// Video whose first frame arrives one frame after audio sample 0 keeps that gap (an empty edit).
    func testLateVideoStartIsKept() throws {
        let path = tempPath("late-video.mp4")
        try writeTestFile(path: path, fps: Rational(30), firstFrame: 1, rate: 48000, channels: 1, seconds: 2)
        let streams = try probe(path, ["-show_entries", "stream=codec_type,start_pts"])["streams"] as! [[String: Any]]
        XCTAssertEqual(streams.first { $0["codec_type"] as? String == "video" }?["start_pts"] as? Int, 3000)
        XCTAssertEqual(streams.first { $0["codec_type"] as? String == "audio" }?["start_pts"] as? Int, -1024)
        let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        XCTAssertEqual(null.status, 0); XCTAssertEqual(null.err, "")
    }

    func testUnwritablePathIsAClearError() throws {
        let v = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: H264Settings())
        XCTAssertThrowsError(try MP4Writer(path: "/nonexistent-reel-dir/x.mp4.part", video: v, audio: nil)) { error in
            let m = (error as? MediaError)?.message ?? ""
            XCTAssertTrue(m.contains("cannot open '/nonexistent-reel-dir/x.mp4.part' for writing: no such file"), m)
            XCTAssertTrue(m.contains("the directory /nonexistent-reel-dir does not exist: create it"), m)
            XCTAssertEqual((error as? MediaError)?.systemError, ENOENT)
        }
    }

    /// Each reason a file cannot be created gets its own fix; a dead or read-only disk (the VM's
    /// capture-ioerror scenario meets EROFS for real) must not be told to "check the directory".
    func testOpenFailureHintsNameTheFix() {
        func hint(_ e: Int32) -> String { MP4Writer.openFailureHint(errno: e, dir: "/v") }
        XCTAssertTrue(hint(EROFS).contains("read-only, often after disk errors"))
        XCTAssertTrue(hint(EIO).contains("storage device failed"))
        XCTAssertTrue(hint(ENOSPC).contains("disk is full"))
        XCTAssertTrue(hint(EACCES).contains("write to the directory /v"))
        XCTAssertEqual(hint(ENOENT), "the directory /v does not exist: create it, or choose another --output-dir")
        XCTAssertEqual(Set([EROFS, EIO, ENOSPC, EDQUOT, EACCES, ENOENT].map(hint)).count, 6)
    }

    /// Video that stops coming (a camera that hangs) while audio goes on: once the audio is
    /// `videoStallMicros` past the video it cuts fragments itself, so the file keeps growing in
    /// complete fragments, and it ends with all the audio.
    func testAudioGoesOnWhenVideoStops() throws {
        let path = tempPath("video-stops.mp4")
        let venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: H264Settings())
        let aenc = try AACEncoder(format: AudioFormat(sampleRate: 48000, channels: 1), settings: AACSettings())
        let mp4 = try MP4Writer(path: path, video: venc, audio: aenc, fragmentMicros: 500_000)
        let y = [UInt8](repeating: 60, count: 64 * 64), c = [UInt8](repeating: 128, count: 32 * 32)
        let pcm = [Int16](repeating: 100, count: 1600)       // one frame's worth at 30 fps
        func audio(_ chunks: Int) throws {
            for _ in 0..<chunks { try pcm.withUnsafeBufferPointer { try aenc.encode(interleaved: $0) { try mp4.writeAudio($0) } } }
        }
        for n in 0..<Int64(60) {                           // 2 s of both
            try audio(1)
            try y.withUnsafeBufferPointer { y in
                try c.withUnsafeBufferPointer { c in
                    let f = I420Frame(y: y.baseAddress!, u: c.baseAddress!, v: c.baseAddress!,
                                      strideY: 64, strideU: 32, strideV: 32, width: 64, height: 64)
                    try venc.encode(f, pts: n * 3000) { try mp4.writeVideo($0) }
                }
            }
        }
        try venc.flush { try mp4.writeVideo($0) }
        let before = mp4.completeBytes
        try audio(30 * 10)                                  // then 10 s of audio alone
        XCTAssertGreaterThan(mp4.completeBytes, before, "fragments are still cut while only audio comes")
        try aenc.flush { try mp4.writeAudio($0) }
        try mp4.finish()
        let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        XCTAssertEqual(null.status, 0); XCTAssertEqual(null.err, "")
        let pcmOut = try shell(["ffmpeg", "-v", "error", "-i", path, "-map", "0:a", "-f", "s16le", "-acodec", "pcm_s16le", "-"])
        XCTAssertGreaterThanOrEqual(pcmOut.out.count / 2, 12 * 48000, "all 12 s of audio are in the file")
    }

    /// An undo's cut reaches the disk before `rollback` returns (before reeld answers the undo):
    /// the file is synced once, already at its cut length, so a power cut after the answer cannot
    /// bring the undone take back.
    func testUndoSyncsTheCutBeforeItReturns() throws {
        let path = tempPath("undo-sync.mp4")
        var venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: H264Settings())
        let mp4 = try MP4Writer(path: path, video: venc, audio: nil, fragmentMicros: 500_000)
        let y = [UInt8](repeating: 90, count: 64 * 64), c = [UInt8](repeating: 128, count: 32 * 32)
        func frame(_ n: Int64) throws {
            try y.withUnsafeBufferPointer { y in
                try c.withUnsafeBufferPointer { c in
                    let f = I420Frame(y: y.baseAddress!, u: c.baseAddress!, v: c.baseAddress!, strideY: 64, strideU: 32, strideV: 32, width: 64, height: 64)
                    try venc.encode(f, pts: n * 3000) { try mp4.writeVideo($0) }
                }
            }
        }
        try mp4.beginTake(index: 1, label: nil, start: 0)
        for n in Int64(0)..<45 { try frame(n) }
        try venc.flush { try mp4.writeVideo($0) }
        venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: H264Settings())
        try mp4.beginTake(index: 2, label: nil, start: 45 * 3000)
        for n in Int64(45)..<90 { try frame(n) }
        let cut = try XCTUnwrap(mp4.takeMarkers.first { $0.index == 2 }).fileOffset
        let synced = Synced()
        mp4.syncFile = { fd in
            var st = stat()
            _ = fstat(fd, &st)
            synced.sizes.append(Int64(st.st_size))
            return 0
        }
        _ = try mp4.rollback(take: 2)
        XCTAssertEqual(synced.sizes, [cut], "one sync, of the file cut back to take 2's marker")
        _ = try mp4.abandon()
    }

    /// An undone take whose first frames never reached the encoder (dropped under load: seen in the
    /// VM, 71 of a take's frames): its first packet came a second after the take's start. The next
    /// take starts at the same start with a fresh x264, so its packets come before that one's: the
    /// muxer must still get them on a clock that never goes back (it refused them, "non
    /// monotonically increasing dts", and the recording failed). The file holds take 1 and the new
    /// take 2 whole, and decodes clean.
    func testUndoOfATakeWhoseFirstFramesWereDropped() throws {
        let path = tempPath("undo-dropped-start.mp4")
        var venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: H264Settings())
        let mp4 = try MP4Writer(path: path, video: venc, audio: nil, fragmentMicros: 500_000)
        let c = [UInt8](repeating: 128, count: 32 * 32)
        func frame(_ n: Int64, luma: UInt8) throws {
            let y = [UInt8](repeating: luma, count: 64 * 64)
            try y.withUnsafeBufferPointer { y in
                try c.withUnsafeBufferPointer { c in
                    let f = I420Frame(y: y.baseAddress!, u: c.baseAddress!, v: c.baseAddress!, strideY: 64, strideU: 32, strideV: 32, width: 64, height: 64)
                    try venc.encode(f, pts: n * 3000) { try mp4.writeVideo($0) }
                }
            }
        }
        try mp4.beginTake(index: 1, label: nil, start: 0)
        for n in Int64(0)..<45 { try frame(n, luma: 60) }
        try venc.flush { try mp4.writeVideo($0) }
        // Take 2 starts at frame 45; frames 45 to 74 were dropped before the encoder.
        venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: H264Settings())
        try mp4.beginTake(index: 2, label: "dropped start", start: 45 * 3000)
        for n in Int64(75)..<120 { try frame(n, luma: 200) }
        XCTAssertEqual(mp4.takeMarkers.map(\.index), [1, 2])
        _ = try mp4.rollback(take: 2)
        venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: H264Settings())
        try mp4.beginTake(index: 2, label: "again", start: 45 * 3000)
        for n in Int64(45)..<90 { try frame(n, luma: 60) }
        try venc.flush { try mp4.writeVideo($0) }
        try mp4.finish()
        let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        XCTAssertEqual(null.status, 0); XCTAssertEqual(null.err, "")
        let gray = try shell(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "gray", "-"]).out
        XCTAssertEqual(gray.count, 90 * 64 * 64, "take 1 and the new take 2: 90 frames")
        let means = stride(from: 0, to: gray.count, by: 64 * 64).map { o in gray[o..<(o + 64 * 64)].reduce(0) { $0 + Int($1) } / (64 * 64) }
        XCTAssertTrue(means.allSatisfy { abs($0 - 51) <= 4 }, "a frame of the undone take: \(means.filter { abs($0 - 51) > 4 }.prefix(5))")
        // The frames sit on the grid: frame 45 at 1.5 s, the last at 89/30 s.
        let pts = try shell(["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "frame=pts_time", "-of", "csv=p=0", path]).out
        let times = String(decoding: pts, as: UTF8.self).split(separator: "\n").map { String($0) }
        XCTAssertEqual(times.count, 90)
        XCTAssertEqual(times.dropFirst(45).first, "1.500000")
        XCTAssertEqual(times.last, "2.966667")
        // Finished into a standard MP4 (what reeld does at stop and at start-up recovery): take 1's
        // last frame must not still reach over the dropped second into the new take 2 (the
        // finisher refused the file as damaged: "its previous samples end at 225000"), and the
        // frames keep their times: 3.0 s, frame 45 at 1.5 s.
        try MP4Finisher.finish(path: path)
        let fin = try shell(["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "frame=pts_time", "-of", "csv=p=0", path]).out
        let finTimes = String(decoding: fin, as: UTF8.self).split(separator: "\n").map { String($0) }
        XCTAssertEqual(finTimes.count, 90)
        XCTAssertEqual(finTimes.dropFirst(45).first, "1.500000")
        XCTAssertEqual(finTimes.last, "2.966667")
    }

    /// The sizes `syncFile` saw. @unchecked Sendable: written and read on the test's thread only.
    private final class Synced: @unchecked Sendable { var sizes: [Int64] = [] }

    /// Takes must come in media order (cuts and markers assume it): an earlier take announced after
    /// a later one, or a take starting before the last one on its track, fails clearly and writes
    /// nothing; after a rollback the next take may start where the removed one did.
    func testTakesOutOfMediaOrderFailClearly() throws {
        let path = tempPath("order.mp4")
        let venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: H264Settings())
        let aenc = try AACEncoder(format: AudioFormat(sampleRate: 48000, channels: 1), settings: AACSettings())
        let mp4 = try MP4Writer(path: path, video: venc, audio: aenc, fragmentMicros: 500_000)
        try mp4.beginTake(index: 1, label: nil, start: 0)
        try mp4.beginTake(index: 2, label: nil, start: 9000)
        try mp4.beginAudioTake(index: 2, label: nil, sample: 4800)
        XCTAssertThrowsError(try mp4.beginTake(index: 1, label: nil, start: 12000)) {
            XCTAssertTrue("\($0)".contains("take 1 announced after take 2; takes must come in media order"), "\($0)")
        }
        XCTAssertThrowsError(try mp4.beginTake(index: 3, label: nil, start: 6000)) {
            XCTAssertTrue("\($0)".contains("take 3's video starts at 6000, before take 2's at 9000"), "\($0)")
        }
        XCTAssertThrowsError(try mp4.beginAudioTake(index: 3, label: nil, sample: 100)) {
            XCTAssertTrue("\($0)".contains("take 3's audio starts at sample 100, before take 2's at 4800"), "\($0)")
        }
        _ = try mp4.rollback(take: 2)
        XCTAssertNoThrow(try mp4.beginTake(index: 2, label: "again", start: 9000))
        _ = try mp4.abandon()
    }

    /// A take the audio never reaches (a microphone that stopped without an error): after
    /// `videoStallMicros` of held video the take's cut is made without the audio, and undoing
    /// that take still cuts the file back to it. The next take (audio back) continues where take 1
    /// ended; the file decodes clean and holds not one frame of the undone take.
    func testUndoOfATakeTheAudioNeverReached() throws {
        let path = tempPath("undo-no-audio.mp4")
        let settings = H264Settings()
        var venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: settings)
        var aenc = try AACEncoder(format: AudioFormat(sampleRate: 48000, channels: 1), settings: AACSettings())
        let mp4 = try MP4Writer(path: path, video: venc, audio: aenc, fragmentMicros: 500_000)
        let c = [UInt8](repeating: 128, count: 32 * 32), pcm = [Int16](repeating: 100, count: 1600)
        func frame(_ pts: Int64, luma: UInt8) throws {
            let y = [UInt8](repeating: luma, count: 64 * 64)
            try y.withUnsafeBufferPointer { y in
                try c.withUnsafeBufferPointer { c in
                    let f = I420Frame(y: y.baseAddress!, u: c.baseAddress!, v: c.baseAddress!, strideY: 64, strideU: 32, strideV: 32, width: 64, height: 64)
                    try venc.encode(f, pts: pts) { try mp4.writeVideo($0) }
                }
            }
        }
        func audio() throws { try pcm.withUnsafeBufferPointer { try aenc.encode(interleaved: $0) { try mp4.writeAudio($0) } } }
        try mp4.beginTake(index: 1, label: nil, start: 0)
        for n in Int64(0)..<60 { try audio(); try frame(n * 3000, luma: 60) }       // take 1: 2 s of both
        // Take 2: a fresh x264 (the last drained), video only for 6 s: more than videoStallMicros.
        try venc.flush { try mp4.writeVideo($0) }
        venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: settings)
        try mp4.beginTake(index: 2, label: "no sound", start: 60 * 3000)
        for n in Int64(60)..<240 { try frame(n * 3000, luma: 200) }
        XCTAssertEqual(mp4.takeMarkers.map(\.index), [1, 2], "take 2 was cut without its audio")
        // Undo take 2: fresh encoders, and the audio continues where the file's does.
        let resume = try XCTUnwrap(try mp4.rollback(take: 2))
        XCTAssertEqual(mp4.takeMarkers.map(\.index), [1])
        // As RecordingSession does: a fresh x264; a fresh AAC encoder whose packets go to the file
        // shifted to continue at `resume`, primed with one frame of context, packets before it dropped.
        venc = try H264Encoder(width: 64, height: 64, fps: Rational(30), settings: settings)
        aenc = try AACEncoder(format: AudioFormat(sampleRate: 48000, channels: 1), settings: AACSettings())
        let base = resume - Int64(aenc.frameSize)
        func shifted(_ samples: [Int16]) throws {
            try samples.withUnsafeBufferPointer {
                try aenc.encode(interleaved: $0) { p in
                    guard p.pts + base >= resume else { return }
                    try mp4.writeAudio(Packet(data: p.data, pts: p.pts + base, dts: p.dts + base, duration: p.duration, isKeyframe: p.isKeyframe))
                }
            }
        }
        try shifted([Int16](repeating: 100, count: aenc.frameSize))
        try mp4.beginTake(index: 2, label: "again", start: 60 * 3000)
        try mp4.beginAudioTake(index: 2, label: "again", sample: resume)
        for n in Int64(60)..<120 { try shifted(pcm); try frame(n * 3000, luma: 60) }
        try venc.flush { try mp4.writeVideo($0) }
        try aenc.flush { try mp4.writeAudio($0) }
        try mp4.finish()
        let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        XCTAssertEqual(null.status, 0); XCTAssertEqual(null.err, "")
        // Every decoded frame is a kept one (luma 60, none of the undone take's 200), 120 of them.
        let gray = try shell(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "gray", "-"]).out
        XCTAssertEqual(gray.count, 120 * 64 * 64)
        let means = stride(from: 0, to: gray.count, by: 64 * 64).map { o in gray[o..<(o + 64 * 64)].reduce(0) { $0 + Int($1) } / (64 * 64) }
        // (Y 60 reads as gray 51 and Y 200 as 214: ffmpeg expands the limited range.)
        XCTAssertTrue(means.allSatisfy { abs($0 - 51) <= 4 }, "a frame of the undone take: \(means.filter { abs($0 - 51) > 4 }.prefix(5))")
    }

    func testAudioOnlyFile() throws {
        let path = tempPath("audio-only.mp4")
        let aenc = try AACEncoder(format: AudioFormat(sampleRate: 48000, channels: 2), settings: AACSettings())
        let mp4 = try MP4Writer(path: path, video: nil, audio: aenc)
        let pcm = [Int16](repeating: 100, count: 960 * 2)
        for _ in 0..<150 { try pcm.withUnsafeBufferPointer { try aenc.encode(interleaved: $0) { try mp4.writeAudio($0) } } }
        try aenc.flush { try mp4.writeAudio($0) }
        try mp4.finish()
        let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        XCTAssertEqual(null.status, 0); XCTAssertEqual(null.err, "")
        XCTAssertThrowsError(try mp4.writeAudio(Packet(data: UnsafeRawBufferPointer(start: nil, count: 0), pts: 0, dts: 0, duration: 0, isKeyframe: true)))
    }
}

/// A write to the file that fails (here EFBIG from RLIMIT_FSIZE, which fails write(2) exactly as a full
/// disk does: a short write, then an error) is detected, is final, and `abandon()` leaves a file that
/// ends with its last complete fragment and decodes clean.
final class MP4WriterFailureTests: XCTestCase {
    func testFailedWriteIsFinalAndAbandonKeepsTheCompleteFragments() throws {
        let path = tempPath("efbig.mp4.part")
        let (w, h, rate) = (320, 240, 48000)
        let venc = try H264Encoder(width: w, height: h, fps: Rational(30), settings: H264Settings())
        let aenc = try AACEncoder(format: AudioFormat(sampleRate: rate, channels: 1), settings: AACSettings())
        let mp4 = try MP4Writer(path: path, video: venc, audio: aenc, fragmentMicros: 500_000)
        // Noise frames, so the file grows quickly (~1 MB/s).
        var seed: UInt32 = 1
        func noise(_ n: Int) -> [UInt8] { (0..<n).map { _ in seed ^= seed << 13; seed ^= seed >> 17; seed ^= seed << 5; return UInt8(truncatingIfNeeded: seed) } }
        let chroma = [UInt8](repeating: 128, count: w * h / 4)
        let tone = (0..<1600).map { Int16(8000 * sin(2 * Double.pi * 1000 * Double($0) / Double(rate))) }

        let limit: rlim_t = 2_000_000
        var old = rlimit()
        XCTAssertEqual(getrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &old), 0)
        let oldHandler = signal(SIGXFSZ, SIG_IGN)  // EFBIG instead of the signal
        var lim = old
        lim.rlim_cur = limit
        XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &lim), 0)
        var failure: MediaError?
        var frames = 0
        do {
            defer { setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &old); signal(SIGXFSZ, oldHandler) }
            while frames < 30 * 30 {
                let y = noise(w * h)
                do {
                    try y.withUnsafeBufferPointer { yp in
                        try chroma.withUnsafeBufferPointer { c in
                            let frame = I420Frame(y: yp.baseAddress!, u: c.baseAddress!, v: c.baseAddress!,
                                                  strideY: w, strideU: w / 2, strideV: w / 2, width: w, height: h)
                            try venc.encode(frame, pts: Int64(frames) * 3000) { try mp4.writeVideo($0) }
                        }
                    }
                    try tone.withUnsafeBufferPointer { try aenc.encode(interleaved: $0) { try mp4.writeAudio($0) } }
                } catch let e as MediaError { failure = e; break }
                frames += 1
            }
        }
        let e = try XCTUnwrap(failure, "no write failed within 30 s of media and a \(limit)-byte limit")
        XCTAssertEqual(e.systemError, EFBIG, e.message)
        XCTAssertTrue(e.message.contains("file too large"), e.message)
        XCTAssertEqual(mp4.writeFailure, e)
        XCTAssertGreaterThan(mp4.completeBytes, 0, "no fragment was complete before the failure (\(frames) frames)")
        XCTAssertLessThanOrEqual(mp4.completeBytes, Int64(limit))

        // Final: later calls throw the same failure and never touch the file again.
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int64
        XCTAssertGreaterThanOrEqual(size, mp4.completeBytes)
        for _ in 0..<5 {
            XCTAssertThrowsError(try tone.withUnsafeBufferPointer { try aenc.encode(interleaved: $0) { try mp4.writeAudio($0) } }) {
                XCTAssertEqual($0 as? MediaError, e)
            }
        }
        XCTAssertThrowsError(try mp4.finish()) { XCTAssertEqual($0 as? MediaError, e) }
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int64, size)

        // abandon(): cut back to the complete fragments; the file decodes clean and lasts what it says.
        let kept = try mp4.abandon()
        XCTAssertEqual(kept.bytes, mp4.completeBytes)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int64, kept.bytes)
        let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        XCTAssertEqual(null.status, 0)
        XCTAssertEqual(null.err, "")
        let counted = try probe(path, ["-count_frames", "-show_entries", "stream=codec_type,nb_read_frames"])["streams"] as! [[String: Any]]
        let videoFrames = Int(try XCTUnwrap(counted.first { $0["codec_type"] as? String == "video" }?["nb_read_frames"] as? String))!
        // kept.micros is where both tracks have data; video's end is the smaller here (x264's delay).
        XCTAssertEqual(Int64(videoFrames) * 1_000_000 / 30, kept.micros, accuracy: 1_000_000 / 30 * 3,
                       "\(videoFrames) frames kept vs \(kept.micros) us reported")
        XCTAssertGreaterThanOrEqual(kept.micros, 1_000_000, "at least two fragments kept")
        XCTAssertLessThan(kept.micros, Int64(frames) * 1_000_000 / 30)
    }
}

/// Video written by one thread while audio is written by another (the pipeline and AAC threads
/// between take boundaries; the pipeline quiesces the AAC thread before it announces a take):
/// the writer's lock keeps the file whole, each track's packets all in, their dts strictly
/// increasing. The packets are encoded first, so the two threads do nothing but write, at once.
final class MP4WriterConcurrencyTests: XCTestCase {
    func testVideoAndAudioFromTwoThreadsMakeOneValidFile() throws {
        let path = tempPath("concurrent.mp4")
        let (w, h, rate, seconds) = (64, 48, 48000, 30)
        let venc = try H264Encoder(width: w, height: h, fps: Rational(30), settings: H264Settings())
        let aenc = try AACEncoder(format: AudioFormat(sampleRate: rate, channels: 2), settings: AACSettings())
        let mp4 = try MP4Writer(path: path, video: venc, audio: aenc, fragmentMicros: 100_000)
        func keep(_ p: Packet) -> OwnedPacket { OwnedPacket(data: Array(p.data), pts: p.pts, dts: p.dts, duration: p.duration, key: p.isKeyframe) }
        var audio: [OwnedPacket] = [], video: [OwnedPacket] = []
        let pcm = [Int16](repeating: 300, count: 480 * 2)
        for _ in 0..<(seconds * 100) { try pcm.withUnsafeBufferPointer { try aenc.encode(interleaved: $0) { audio.append(keep($0)) } } }
        try aenc.flush { audio.append(keep($0)) }
        var y = [UInt8](repeating: 60, count: w * h)
        let c = [UInt8](repeating: 128, count: w * h / 4)
        for n in 0..<Int64(seconds * 30) {
            y[Int(n) % y.count] = 200
            try y.withUnsafeBufferPointer { y in
                try c.withUnsafeBufferPointer { c in
                    let f = I420Frame(y: y.baseAddress!, u: c.baseAddress!, v: c.baseAddress!,
                                      strideY: w, strideU: w / 2, strideV: w / 2, width: w, height: h)
                    try venc.encode(f, pts: n * 3000) { video.append(keep($0)) }
                }
            }
        }
        try venc.flush { video.append(keep($0)) }

        let shared = WriterBox(mp4, audio)
        let go = DispatchSemaphore(value: 0), audioDone = DispatchSemaphore(value: 0)
        Thread {
            go.wait()
            do { for p in shared.audio { try p.write(shared.mp4.writeAudio) } } catch { shared.audioError = "\(error)" }
            audioDone.signal()
        }.start()
        go.signal()
        for p in video { try p.write(mp4.writeVideo) }
        XCTAssertEqual(audioDone.wait(timeout: .now() + 60), .success)
        XCTAssertNil(shared.audioError)
        try mp4.finish()
        XCTAssertEqual(mp4.dtsFixes, 0)

        let null = try shell(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        XCTAssertEqual(null.status, 0); XCTAssertEqual(null.err, "")
        for (sel, count) in [("v", video.count), ("a", audio.count)] {
            let pk = try probe(path, ["-select_streams", sel, "-show_entries", "packet=dts", "-show_packets"])["packets"] as! [[String: Any]]
            let dts = pk.map { $0["dts"] as! Int }
            XCTAssertEqual(dts.count, count, "\(sel): every packet is in the file")
            XCTAssertTrue(zip(dts, dts.dropFirst()).allSatisfy { $0 < $1 }, "\(sel): dts strictly increasing")
        }
    }
}

private struct OwnedPacket: Sendable {
    let data: [UInt8], pts: Int64, dts: Int64, duration: Int64, key: Bool
    func write(_ to: (Packet) throws -> Void) throws {
        try data.withUnsafeBytes { try to(Packet(data: $0, pts: pts, dts: dts, duration: duration, isKeyframe: key)) }
    }
}

/// @unchecked Sendable: `audioError` is written by the audio thread alone before it signals;
/// `mp4` is thread-safe (its lock is what the test checks); `audio` is immutable.
private final class WriterBox: @unchecked Sendable {
    let mp4: MP4Writer
    let audio: [OwnedPacket]
    var audioError: String?
    init(_ mp4: MP4Writer, _ audio: [OwnedPacket]) { self.mp4 = mp4; self.audio = audio }
}
