internal import CFFmpeg
internal import CReelShim
import ReelCore

/// Reads raw video from a YUV4MPEG2 file (4:2:0 or 4:2:2) or S16 PCM from a WAV file, with
/// libavformat's demuxers: the reproducible sources of benchmarks and long unpaced runs.
public final class MediaFileReader {
    public enum Content: Sendable { case video(VideoFormat), audio(AudioFormat) }
    public let path: String
    public let content: Content

    private var ctx: UnsafeMutablePointer<AVFormatContext>?  // owned: avformat_close_input in deinit
    private let packet: AVPacketBox                          // reused for every read
    private var pending = 0     // audio: bytes of the current packet not yet handed out
    private var pendingOffset = 0

    /// Opens `path` and checks it holds what `video` asks for (true: Y4M video, false: WAV audio).
    public init(path: String, video: Bool) throws {
        self.path = path
        let what = "cannot read \(video ? "video" : "audio") file \(path)"
        var c: UnsafeMutablePointer<AVFormatContext>? = nil
        let fmt = av_find_input_format(video ? "yuv4mpegpipe" : "wav")
        try checkAV(avformat_open_input(&c, path, fmt, nil), what)
        ctx = c
        packet = try AVPacketBox(what)
        guard let c, c.pointee.nb_streams >= 1, let st = c.pointee.streams[0], let par = st.pointee.codecpar else {
            throw MediaError("\(what): no stream found")
        }
        if video {
            let pf: PixelFormat
            switch AVPixelFormat(par.pointee.format) {
            case AV_PIX_FMT_YUV420P: pf = .i420
            case AV_PIX_FMT_YUV422P: pf = .i422
            default:
                throw MediaError("\(what): pixel format \(String(cString: av_get_pix_fmt_name(AVPixelFormat(par.pointee.format)))) is not supported (use a 4:2:0 or 4:2:2 Y4M, e.g. ffmpeg -i in -pix_fmt yuv420p out.y4m)")
            }
            let r = st.pointee.avg_frame_rate.num > 0 ? st.pointee.avg_frame_rate : st.pointee.r_frame_rate
            guard r.num > 0, r.den > 0, par.pointee.width % 2 == 0, par.pointee.height % 2 == 0 else {
                throw MediaError("\(what): needs even width and height and a frame rate in the header")
            }
            content = .video(VideoFormat(width: Int(par.pointee.width), height: Int(par.pointee.height),
                                         fps: Rational(Int64(r.num), Int64(r.den)), pixelFormat: pf))
        } else {
            guard par.pointee.codec_id == AV_CODEC_ID_PCM_S16LE else {
                throw MediaError("\(what): only 16-bit PCM WAV is supported (convert with ffmpeg -i in -c:a pcm_s16le out.wav)")
            }
            content = .audio(AudioFormat(sampleRate: Int(par.pointee.sample_rate), channels: Int(par.pointee.ch_layout.nb_channels)))
        }
    }
    deinit { avformat_close_input(&ctx) }

    /// Reads the next frame into `dst` (exactly one frame's bytes); false at the end of the file.
    public func readVideoFrame(into dst: UnsafeMutableRawBufferPointer) throws -> Bool {
        try readVideoFrame(expecting: dst.count) { dst.copyMemory(from: $0) }
    }

    /// Hands the next frame's bytes (exactly one frame, valid only inside `body`) to `body`; false
    /// at the end of the file. For a reader that converts while it reads, with no copy between.
    public func readVideoFrame(expecting bytes: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        guard case .video = content else { throw MediaError("\(path) is not a video file") }
        guard try nextPacket() else { return false }
        defer { av_packet_unref(packet.p) }
        let p = packet.p.pointee
        guard Int(p.size) == bytes else {
            throw MediaError("\(path): a frame of \(p.size) bytes where \(bytes) were expected (truncated file?)")
        }
        // Safe: the packet holds p.size bytes until av_packet_unref, after body returns.
        try body(UnsafeRawBufferPointer(start: p.data, count: Int(p.size)))
        return true
    }

    /// Skips one frame (a paced source that had no free slot): false at the end of the file.
    public func skipVideoFrame() throws -> Bool {
        guard case .video = content else { throw MediaError("\(path) is not a video file") }
        guard try nextPacket() else { return false }
        av_packet_unref(packet.p)
        return true
    }

    /// Reads up to `maxFrames` interleaved frames into `dst`; 0 at the end of the file.
    public func readAudio(into dst: UnsafeMutablePointer<Int16>, maxFrames: Int) throws -> Int {
        try takeAudio(maxFrames: maxFrames, into: dst)
    }

    /// Skips up to `maxFrames` frames (a paced source that had no free slot); 0 at the end.
    public func skipAudio(maxFrames: Int) throws -> Int {
        try takeAudio(maxFrames: maxFrames, into: nil)
    }

    /// Hands out up to `maxFrames` frames of the current packet, copied into `dst` unless nil.
    private func takeAudio(maxFrames: Int, into dst: UnsafeMutablePointer<Int16>?) throws -> Int {
        guard case let .audio(f) = content else { throw MediaError("\(path) is not an audio file") }
        let frameBytes = 2 * f.channels
        while pending == 0 {
            av_packet_unref(packet.p)
            guard try nextPacket() else { return 0 }
            pending = Int(packet.p.pointee.size) / frameBytes * frameBytes
            pendingOffset = 0
        }
        let n = min(maxFrames, pending / frameBytes)
        if let dst {
            // Safe: n frames are left in the packet at pendingOffset, and dst has room for maxFrames >= n.
            UnsafeMutableRawPointer(dst).copyMemory(from: packet.p.pointee.data + pendingOffset, byteCount: n * frameBytes)
        }
        pending -= n * frameBytes
        pendingOffset += n * frameBytes
        return n
    }

    private func nextPacket() throws -> Bool {
        let rc = av_read_frame(ctx, packet.p)
        if rc == creel_averror_eof() { return false }
        try checkAV(rc, "cannot read \(path)")
        return true
    }
}
