internal import CFFmpeg
internal import CFFmpegShim
internal import ReelFFmpeg
import ReelCore

/// Reads raw video from a YUV4MPEG2 file (4:2:0 or 4:2:2) or S16 PCM from a WAV file, with
/// libavformat's demuxers: the reproducible sources of benchmarks and long unpaced runs.
public final class MediaFileReader {
    public enum Content: Sendable { case video(VideoFormat), audio(AudioFormat) }
    public let path: String
    public let content: Content

    private let input: InputContext
    private let packet: AVPacketBox   // reused for every read
    private var pending = 0     // audio: bytes of the current packet not yet handed out
    private var pendingOffset = 0
    // Video: one frame's bytes in the file, frames read or skipped so far, and the buffer
    // readVideoFrame(_:) reads into (owned: deallocated in deinit; nil until the first such read).
    private var videoFrameBytes = 0
    private var framesRead = 0
    private var frameBuffer: UnsafeMutableRawBufferPointer?
    private static let frameMagic = Array("FRAME".utf8)

    /// Opens `path` and checks it holds what `video` asks for (true: Y4M video, false: WAV audio).
    public init(path: String, video: Bool) throws {
        self.path = path
        let what = "cannot read \(video ? "video" : "audio") file \(path)"
        input = try InputContext(path: path, format: av_find_input_format(video ? "yuv4mpegpipe" : "wav"), failure: MediaError.failing(what))
        packet = try AVPacketBox(what)
        let c = input.p
        guard c.pointee.nb_streams >= 1, let st = c.pointee.streams[0], let par = st.pointee.codecpar else {
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
            guard r.num > 0, r.den > 0, let fps = Rational(r), par.pointee.width % 2 == 0, par.pointee.height % 2 == 0 else {
                throw MediaError("\(what): needs even width and height and a frame rate in the header")
            }
            content = .video(VideoFormat(width: Int(par.pointee.width), height: Int(par.pointee.height),
                                         fps: fps, pixelFormat: pf))
            videoFrameBytes = pf.frameBytes(width: Int(par.pointee.width), height: Int(par.pointee.height))
        } else {
            guard par.pointee.codec_id == AV_CODEC_ID_PCM_S16LE else {
                throw MediaError("\(what): only 16-bit PCM WAV is supported (convert with ffmpeg -i in -c:a pcm_s16le out.wav)")
            }
            content = .audio(AudioFormat(sampleRate: Int(par.pointee.sample_rate), channels: Int(par.pointee.ch_layout.nb_channels)))
        }
    }
    deinit { frameBuffer?.deallocate() }

    /// Reads the next frame into `dst` (exactly one frame's bytes); false at the end of the file.
    public func readVideoFrame(into dst: UnsafeMutableRawBufferPointer) throws -> Bool {
        guard try nextFrameHeader() else { return false }
        try readFrameBytes(into: dst)
        return true
    }

    /// Hands the next frame's bytes (exactly one frame as stored in the file, valid only inside
    /// `body`) to `body`; false at the end of the file. For a reader that converts while it reads:
    /// the bytes go through one buffer, allocated at the first frame and reused for every later one.
    public func readVideoFrame(_ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        guard try nextFrameHeader() else { return false }
        let buffer = frameBuffer ?? .allocate(byteCount: videoFrameBytes, alignment: 64)
        frameBuffer = buffer
        try readFrameBytes(into: buffer)
        try body(UnsafeRawBufferPointer(buffer))
        return true
    }

    /// Skips one frame (a paced source that had no free slot): false at the end of the file.
    public func skipVideoFrame() throws -> Bool {
        guard try nextFrameHeader() else { return false }
        let pb = try videoIO()
        let before = avio_tell(pb)
        let rc = avio_skip(pb, Int64(videoFrameBytes))
        guard rc >= 0, rc - before == Int64(videoFrameBytes) else {
            throw MediaError("\(path): the last frame is cut short (truncated file?)")
        }
        framesRead += 1
        return true
    }

    /// Video frames are read with avio straight from the file once libavformat has parsed the
    /// stream header: av_read_frame would allocate a packet for every frame, and the capture
    /// thread reading it must not allocate per frame. A frame is `FRAME[ params]\n` and its bytes.
    private func videoIO() throws -> UnsafeMutablePointer<AVIOContext> {
        guard case .video = content else { throw MediaError("\(path) is not a video file") }
        guard let pb = input.p.pointee.pb else { throw MediaError("\(path): the file is not open") }
        return pb
    }

    /// Reads one frame header; false at a clean end of the file (no byte of a new frame).
    private func nextFrameHeader() throws -> Bool {
        let pb = try videoIO()
        let magic = Self.frameMagic
        var n = 0
        while true {
            let c = avio_r8(pb)   // 0 at the end of the file (and avio_feof says so)
            if avio_feof(pb) != 0 {
                if n == 0 { return false }
                throw MediaError("\(path): the file ends inside a frame header (truncated file?)")
            }
            if n < magic.count {
                guard UInt8(truncatingIfNeeded: c) == magic[n] else {
                    throw MediaError("\(path): no FRAME header where frame \(framesRead + 1) should start (not a YUV4MPEG2 stream, or a frame of another size before it)")
                }
            } else if c == 0x0A {
                return true
            } else if n > 256 {
                throw MediaError("\(path): a frame header longer than 256 bytes at frame \(framesRead + 1)")
            }
            n += 1
        }
    }

    private func readFrameBytes(into dst: UnsafeMutableRawBufferPointer) throws {
        guard dst.count == videoFrameBytes else {
            throw MediaError("\(path): asked for a frame of \(dst.count) bytes where the file's frames are \(videoFrameBytes)")
        }
        let pb = try videoIO()
        var got = 0
        while got < videoFrameBytes {
            // Safe: dst has videoFrameBytes bytes and got < videoFrameBytes.
            let rc = avio_read(pb, dst.baseAddress!.assumingMemoryBound(to: UInt8.self) + got, Int32(videoFrameBytes - got))
            if rc <= 0 {
                if rc == 0 || rc == creel_averror_eof() {
                    throw MediaError("\(path): frame \(framesRead + 1) is cut short after \(got) of \(videoFrameBytes) bytes (truncated file?)")
                }
                try checkAV(rc, "cannot read \(path)")
            }
            got += Int(rc)
        }
        framesRead += 1
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
        let rc = av_read_frame(input.p, packet.p)
        if rc == creel_averror_eof() { return false }
        try checkAV(rc, "cannot read \(path)")
        return true
    }
}
