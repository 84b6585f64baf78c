internal import CFFmpeg
internal import CFFmpegShim
import ReelCore
internal import ReelFFmpeg
import Synchronization

/// Why a file could not be analysed at all (`reelctl verify` exits 2): names the file and the fix.
public struct VerifyError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

// MARK: - What one pass over the file collects

public struct VideoStreamInfo: Sendable {
    public var index: Int
    public var codec: String?
    public var profile: String?
    public var pixFmt: String?
    public var width: Int
    public var height: Int
    public var timeBase: Rational
    public var startPts: Int64?
    public var rFrameRate: Rational?
    public var avgFrameRate: Rational?
    public var nbFrames: Int?
    public var startTime: Rational? { startPts.map { Rational($0) * timeBase } }
}

public struct AudioStreamInfo: Sendable {
    public var index: Int
    public var codec: String?
    public var profile: String?
    public var sampleRate: Int
    public var channels: Int
    public var timeBase: Rational
    public var startPts: Int64?
    public var startTime: Rational? { startPts.map { Rational($0) * timeBase } }
}

public struct StreamsInfo: Sendable {
    public var format: String?
    public var video: VideoStreamInfo?
    public var audio: AudioStreamInfo?
}

/// One decoded video frame as read: output pts, the strip's timecode and the luma below it.
struct ScannedFrame: Sendable {
    var pts: Int64?
    var ms: UInt32
    var margin: Double
    var lumaBelow: Double
}

public struct AudioGap: Sendable {
    public var pts: Int64
    public var expected: Rational   // in stream ticks
    public var gapMs: Double
}

struct AudioScan: Sendable {
    var firstPts: Int64?
    var samples: Int64 = 0
    var frames = 0
    var gaps: [AudioGap] = []
    var gapCount = 0
    var maxChannelDifference = 0
    var beeps: [Beep] = []
}

struct Scan: Sendable {
    var streams: StreamsInfo
    var frames: [ScannedFrame] = []
    var videoPackets = 0
    var audio: AudioScan?
    var errors: [String] = []
}

// MARK: - FFmpeg's error log, collected instead of printed

/// Scans are serialised: FFmpeg's log callback, which collects the error lines, is process-wide.
private let scanLock = Mutex<Void>(())

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s.removeFirst() }
        while let c = s.last, c.isWhitespace { s.removeLast() }
        return String(s)
    }
}

private func cString(_ p: UnsafePointer<CChar>?) -> String? { p.map { String(cString: $0) } }

// MARK: - The strip reader

/// Where the timecode cells and the region below the strip are sampled, for one frame size:
/// the oracle's `_read_strip` block in the centre of each cell, and every `rowStep`-th row
/// below the strip (the flash test needs a mean, not every pixel).
struct StripGeometry {
    let width: Int, height: Int
    let rows: Range<Int>
    let cells: [Range<Int>]
    let belowRows: StrideTo<Int>
    let belowCount: Int

    static let threshold = 125.0     // contract: white Y=235, black Y=16

    init(width: Int, height: Int) {
        self.width = width; self.height = height
        let stripH = height / 8
        let cellW = Double(width) / 32.0
        let d = max(1, stripH / 6)
        let r0 = max(0, stripH / 2 - d), r1 = min(height, stripH / 2 + d)
        rows = r0..<max(r0, r1)
        let halfW = max(1, Int((cellW / 6).rounded(.down)))
        cells = (0..<32).map { i in
            let cx = Int((Double(i) + 0.5) * cellW)
            let c0 = max(0, cx - halfW), c1 = min(width, cx + halfW)
            return c0..<max(c0, c1)
        }
        let first = min(height, stripH + 2)
        let n = height - first
        let step = max(1, n / 32)
        belowRows = stride(from: first, to: height, by: step)
        belowCount = Array(belowRows).count * width
    }

    /// (timecode, smallest distance of a cell mean to the threshold, mean luma below the strip).
    func read(_ y: UnsafePointer<UInt8>, stride: Int) -> (UInt32, Double, Double) {
        var ms: UInt32 = 0
        var margin = 255.0
        for (i, cols) in cells.enumerated() {
            var sum = 0
            for r in rows {
                let row = y + r * stride
                for c in cols { sum += Int(row[c]) }
            }
            let count = rows.count * cols.count
            guard count > 0 else { continue }
            let v = Double(sum) / Double(count)
            margin = min(margin, abs(v - Self.threshold))
            if v > Self.threshold { ms |= 1 << UInt32(31 - i) }
        }
        var below = 0
        for r in belowRows {
            let row = y + r * stride
            var s = 0
            for c in 0..<width { s &+= Int(row[c]) }
            below += s
        }
        let mean = belowCount > 0 ? Double(below) / Double(belowCount) : 0
        return (ms, margin, mean)
    }
}

// MARK: - The scan

/// Demuxes and decodes the first video and the first audio stream in one pass, keeping per
/// video frame only its pts, timecode and flash luma, and streaming the audio through the beep
/// detector: memory stays flat however long the file is.
func scan(path: String) throws(VerifyError) -> Scan {
    try scanLock.withLock { _ throws(VerifyError) in
        creel_log_capture_begin()
        defer { creel_log_capture_end() }
        var result = try scanUnlocked(path: path)
        // the lines FFmpeg logged at error level (what `ffmpeg -v error -xerror` prints)
        var buf = [CChar](repeating: 0, count: 16384)
        buf.withUnsafeMutableBufferPointer { creel_log_captured($0.baseAddress, Int32($0.count)) }
        let logged = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .split(separator: "\n").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty }
        result.errors = logged + result.errors
        return result
    }
}

private func scanUnlocked(path: String) throws(VerifyError) -> Scan {
    let input = try InputContext(path: path, format: nil) {
        VerifyError("cannot open \(path): \($0) (give the path of an MP4 recorded by reeld)")
    }
    let fmt = input.p
    var rc = avformat_find_stream_info(fmt, nil)
    guard rc >= 0 else {
        throw VerifyError("cannot read the streams of \(path): \(avErrorText(rc)) (is it a complete MP4? a recording still in progress or cut short may be unreadable)")
    }
    var streams = StreamsInfo(format: cString(fmt.pointee.iformat?.pointee.name))
    var vIndex: Int32 = -1, aIndex: Int32 = -1
    for k in 0..<Int(fmt.pointee.nb_streams) {
        guard let st = fmt.pointee.streams[k], let par = st.pointee.codecpar else { continue }
        let tb = Rational(st.pointee.time_base) ?? Rational(1, 1)
        let start: Int64? = st.pointee.start_time == Int64.min ? nil : st.pointee.start_time
        let codec = cString(avcodec_get_name(par.pointee.codec_id))
        let profile = par.pointee.profile == FF_PROFILE_UNKNOWN ? nil : cString(avcodec_profile_name(par.pointee.codec_id, par.pointee.profile))
        if par.pointee.codec_type == AVMEDIA_TYPE_VIDEO && vIndex < 0 {
            vIndex = Int32(k)
            let pf = AVPixelFormat(par.pointee.format)
            streams.video = VideoStreamInfo(
                index: k, codec: codec, profile: profile,
                pixFmt: par.pointee.format < 0 ? nil : cString(av_get_pix_fmt_name(pf)),
                width: Int(par.pointee.width), height: Int(par.pointee.height), timeBase: tb, startPts: start,
                rFrameRate: Rational(st.pointee.r_frame_rate), avgFrameRate: Rational(st.pointee.avg_frame_rate),
                nbFrames: st.pointee.nb_frames > 0 ? Int(st.pointee.nb_frames) : nil)
        } else if par.pointee.codec_type == AVMEDIA_TYPE_AUDIO && aIndex < 0 {
            aIndex = Int32(k)
            streams.audio = AudioStreamInfo(
                index: k, codec: codec, profile: profile, sampleRate: Int(par.pointee.sample_rate),
                channels: Int(par.pointee.ch_layout.nb_channels), timeBase: tb, startPts: start)
        }
    }
    var out = Scan(streams: streams)
    guard vIndex >= 0 || aIndex >= 0 else {
        throw VerifyError("\(path) has neither a video nor an audio stream (is it a recording made by reeld?)")
    }

    func openDecoder(_ index: Int32, _ kind: String) throws(VerifyError) -> CodecContext {
        let st = fmt.pointee.streams[Int(index)]!
        let par = st.pointee.codecpar!
        guard let codec = avcodec_find_decoder(par.pointee.codec_id) else {
            throw VerifyError("\(path): no decoder for its \(kind) codec \(cString(avcodec_get_name(par.pointee.codec_id)) ?? "?") (install the full libavcodec, e.g. apt-get install libavcodec59)")
        }
        let box = try CodecContext(codec) { VerifyError("\(path): \(kind) decoder: \($0)") }
        let ctx = box.p
        var rc = avcodec_parameters_to_context(ctx, par)
        guard rc >= 0 else { throw VerifyError("\(path): bad \(kind) codec parameters: \(avErrorText(rc))") }
        ctx.pointee.pkt_timebase = st.pointee.time_base
        if kind == "video" { ctx.pointee.thread_count = 0 }   // as many threads as cores, like ffmpeg
        rc = avcodec_open2(ctx, codec, nil)
        guard rc >= 0 else { throw VerifyError("\(path): cannot open the \(kind) decoder: \(avErrorText(rc))") }
        return box
    }
    let vdec = vIndex >= 0 ? try openDecoder(vIndex, "video") : nil
    let adec = aIndex >= 0 ? try openDecoder(aIndex, "audio") : nil
    let packetBox = try AVPacketBox { VerifyError("\(path): \($0)") }
    let frameBox = try Frame { VerifyError("\(path): \($0)") }
    let packet = packetBox.p, frame = frameBox.p
    // The boxes own the context, decoders, packet and frame until the scan returns.
    defer { av_packet_unref(packet); withExtendedLifetime((input, vdec, adec, packetBox, frameBox)) {} }

    var geometry: StripGeometry? = nil
    // 8-bit formats whose first plane is the luma plane
    let lumaFirst: Set<Int32> = [AV_PIX_FMT_YUV420P.rawValue, AV_PIX_FMT_YUVJ420P.rawValue, AV_PIX_FMT_YUV422P.rawValue,
                                 AV_PIX_FMT_YUVJ422P.rawValue, AV_PIX_FMT_YUV444P.rawValue, AV_PIX_FMT_YUVJ444P.rawValue,
                                 AV_PIX_FMT_NV12.rawValue, AV_PIX_FMT_NV21.rawValue, AV_PIX_FMT_GRAY8.rawValue]
    var audio = AudioScan()
    var detector: BeepDetector? = nil
    var s16: [Int16] = []
    var lastAudio: (pts: Int64, samples: Int)? = nil
    let eof = creel_averror_eof(), eagain = creel_averror_eagain()

    func takeVideo() throws(VerifyError) {
        let f = frame.pointee
        let pts = f.pts != Int64.min ? f.pts : (f.best_effort_timestamp != Int64.min ? f.best_effort_timestamp : nil)
        let pf = AVPixelFormat(f.format)
        guard lumaFirst.contains(pf.rawValue), let y = f.data.0 else {
            throw VerifyError("\(path): video decodes to \(cString(av_get_pix_fmt_name(pf)) ?? "an unknown pixel format"), which this tool cannot read (the test sources must be recorded as 8-bit YUV, e.g. h264 yuv420p)")
        }
        if geometry == nil || geometry!.width != Int(f.width) || geometry!.height != Int(f.height) {
            geometry = StripGeometry(width: Int(f.width), height: Int(f.height))
        }
        let (ms, margin, below) = geometry!.read(UnsafePointer(y), stride: Int(f.linesize.0))
        out.frames.append(ScannedFrame(pts: pts, ms: ms, margin: margin, lumaBelow: below))
    }

    func takeAudio(_ info: AudioStreamInfo) {
        let f = frame.pointee
        let n = Int(f.nb_samples)
        let ch = max(1, Int(f.ch_layout.nb_channels))
        let pts: Int64? = f.pts != Int64.min ? f.pts : (f.best_effort_timestamp != Int64.min ? f.best_effort_timestamp : nil)
        if audio.frames == 0 { audio.firstPts = pts }
        if let pts, let last = lastAudio {
            // the next frame must start exactly where this one ended
            let want = Rational(last.pts) + Rational(Int64(last.samples), Int64(info.sampleRate)) / info.timeBase
            if Rational(pts) != want {
                audio.gapCount += 1
                if audio.gaps.count < 20 {
                    audio.gaps.append(AudioGap(pts: pts, expected: want,
                                               gapMs: ((Rational(pts) - want) * info.timeBase * 1000).double))
                }
            }
        }
        lastAudio = pts.map { ($0, n) }
        audio.frames += 1
        audio.samples += Int64(n)
        if detector == nil { detector = BeepDetector(rate: Int(f.sample_rate > 0 ? f.sample_rate : Int32(info.sampleRate))) }
        if s16.count < n * ch { s16 = [Int16](repeating: 0, count: n * ch) }
        let fmtS = AVSampleFormat(f.format)
        let planar = av_sample_fmt_is_planar(fmtS) != 0
        guard let ext = f.extended_data else { return }
        // Convert to S16 the way libswresample does for `ffmpeg -f s16le` (round, clip).
        func sample(_ c: Int, _ i: Int) -> Int16 {
            let plane = planar ? c : 0
            let idx = planar ? i : i * ch + c
            guard let base = ext[plane] else { return 0 }
            switch fmtS {
            case AV_SAMPLE_FMT_FLTP, AV_SAMPLE_FMT_FLT:
                let v = UnsafeRawPointer(base).assumingMemoryBound(to: Float.self)[idx]
                return clip16((v * 32768).rounded(.toNearestOrEven))
            case AV_SAMPLE_FMT_DBLP, AV_SAMPLE_FMT_DBL:
                let v = UnsafeRawPointer(base).assumingMemoryBound(to: Double.self)[idx]
                return clip16(Float((v * 32768).rounded(.toNearestOrEven)))
            case AV_SAMPLE_FMT_S16P, AV_SAMPLE_FMT_S16:
                return UnsafeRawPointer(base).assumingMemoryBound(to: Int16.self)[idx]
            case AV_SAMPLE_FMT_S32P, AV_SAMPLE_FMT_S32:
                return Int16(truncatingIfNeeded: UnsafeRawPointer(base).assumingMemoryBound(to: Int32.self)[idx] >> 16)
            case AV_SAMPLE_FMT_U8P, AV_SAMPLE_FMT_U8:
                return Int16(Int(base[idx]) - 128) << 8
            default:
                return 0
            }
        }
        var maxDiff = audio.maxChannelDifference
        s16.withUnsafeMutableBufferPointer { buf in
            for i in 0..<n {
                let s0 = sample(0, i)
                buf[i] = s0
                if ch > 1 {
                    for c in 1..<ch { maxDiff = max(maxDiff, abs(Int(sample(c, i)) - Int(s0))) }
                }
            }
            detector!.feed(UnsafeBufferPointer(rebasing: buf[0..<n]))
        }
        audio.maxChannelDifference = maxDiff
    }

    /// Sends one packet (nil: drain) and takes every frame the decoder has ready.
    func decode(_ dec: CodecContext, _ pkt: UnsafeMutablePointer<AVPacket>?, video: Bool) throws(VerifyError) {
        let ctx = dec.p
        let kind = video ? "video" : "audio"
        var rc = avcodec_send_packet(ctx, pkt)
        var resend = false
        if rc == eagain { resend = true }
        else if rc < 0 && rc != eof {
            let at = pkt.map { $0.pointee.pts != Int64.min ? " at pts \($0.pointee.pts)" : "" } ?? ""
            out.errors.append("\(kind) packet\(at) does not decode: \(avErrorText(rc))")
            return
        }
        while true {
            rc = avcodec_receive_frame(ctx, frame)
            if rc == eagain || rc == eof { break }
            if rc < 0 {
                out.errors.append("\(kind) decoder: \(avErrorText(rc))")
                break
            }
            defer { av_frame_unref(frame) }
            if frame.pointee.decode_error_flags != 0 || frame.pointee.flags & AV_FRAME_FLAG_CORRUPT != 0 {
                out.errors.append("corrupt \(kind) frame at pts \(frame.pointee.pts)")
            }
            if video { try takeVideo() } else if let info = out.streams.audio { takeAudio(info) }
        }
        if resend { try decode(dec, pkt, video: video) }
    }

    while true {
        rc = av_read_frame(fmt, packet)
        if rc == eof { break }
        if rc < 0 {
            out.errors.append("reading \(path) stopped: \(avErrorText(rc)) (the file is truncated or damaged)")
            break
        }
        if packet.pointee.stream_index == vIndex, let vdec {
            out.videoPackets += 1
            try decode(vdec, packet, video: true)
        } else if packet.pointee.stream_index == aIndex, let adec {
            try decode(adec, packet, video: false)
        }
        av_packet_unref(packet)
    }
    if let vdec { try decode(vdec, nil, video: true) }
    if let adec { try decode(adec, nil, video: false) }
    if aIndex >= 0 {
        audio.beeps = detector?.finish() ?? []
        out.audio = audio
    }
    return out
}

@inline(__always) private func clip16(_ v: Float) -> Int16 {
    v >= 32767 ? 32767 : (v <= -32768 ? -32768 : Int16(v))
}
