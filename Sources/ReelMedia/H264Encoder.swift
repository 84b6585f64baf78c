internal import CX264
internal import CX264Shim
import ReelCore

/// H.264 (libx264, its own C API). Input I420 with pts in 1/90000; output length-prefixed NAL units
/// (as MP4 stores them) with SPS/PPS only in `extradata` (avcC), never repeated in the stream.
public final class H264Encoder {
    public static let presets = ["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow", "placebo"]
    public static let tunes = ["film", "animation", "grain", "stillimage", "psnr", "ssim", "fastdecode", "zerolatency"]
    public static let profiles = ["baseline", "main", "high", "high10", "high422", "high444"]

    public let width: Int
    public let height: Int
    public let fps: Rational
    public let timeBase = Rational(1, 90_000)
    /// Duration of one frame at the nominal rate, in `timeBase` ticks (3000 at 30 fps).
    public let frameDuration: Int64
    /// AVCDecoderConfigurationRecord (avcC) holding SPS and PPS.
    public var extradata: [UInt8] { avcC }

    private let handle: OpaquePointer  // x264_t*, owned: opened in init, closed in deinit
    private let avcC: [UInt8]
    private var picIn = x264_picture_t()   // reused for every frame
    private var picOut = x264_picture_t()
    private var lastPts: Int64? = nil
    private var flushed = false

    public init(width: Int, height: Int, fps: Rational, settings: H264Settings) throws {
        func fail(_ why: String) -> MediaError { MediaError("cannot open x264 encoder: \(why)") }
        guard width > 0, height > 0, width % 2 == 0, height % 2 == 0 else {
            throw fail("size \(width)x\(height) is not positive and even; yuv420p needs even width and height")
        }
        guard fps.num > 0, fps.den > 0, fps.num <= Int64(UInt32.max), fps.den <= Int64(UInt32.max) else {
            throw fail("frame rate \(fps) is not a positive rational")
        }
        guard settings.keyintSeconds >= 1 else { throw fail("keyintSeconds \(settings.keyintSeconds) must be at least 1") }
        guard settings.threads >= 0 else { throw fail("threads \(settings.threads) must be 0 (auto) or more") }
        var p = x264_param_t()
        if x264_param_default_preset(&p, settings.preset, settings.tune) < 0 {
            if !Self.presets.contains(settings.preset) {
                throw fail("unknown preset '\(settings.preset)' (valid: \(Self.presets.joined(separator: ", ")))")
            }
            throw fail("unknown tune '\(settings.tune ?? "")' (valid: \(Self.tunes.joined(separator: ", ")), comma-separated)")
        }
        p.i_log_level = X264_LOG_WARNING
        creel_x264_route_log(&p)  // to reeld's log at its own level, once LibraryLog.route is set
        p.i_threads = Int32(settings.threads)
        p.i_width = Int32(width); p.i_height = Int32(height)
        p.i_csp = X264_CSP_I420
        p.i_bitdepth = 8
        p.i_fps_num = UInt32(fps.num); p.i_fps_den = UInt32(fps.den)
        // Constant-rate input: rate control and the SPS timing use the nominal fps; x264 passes our
        // 1/90000 pts through untouched (it never rescales them) and derives DTS from them.
        p.b_vfr_input = 0
        p.i_keyint_max = Int32(max(1, rescale(Int64(settings.keyintSeconds) * fps.num, 1, fps.den)))
        p.b_repeat_headers = 0   // SPS/PPS go to the MP4 sample description (avcC) only
        p.b_annexb = 0           // 4-byte NAL length prefixes, the MP4 sample format
        if let kbps = settings.bitrateKbps {
            guard kbps > 0 else { throw fail("bitrate \(kbps) kbps must be positive") }
            p.rc.i_rc_method = X264_RC_ABR; p.rc.i_bitrate = Int32(kbps)
        } else if let crf = settings.crf {
            guard (0...51).contains(crf) else { throw fail("crf \(crf) is outside 0...51") }
            p.rc.i_rc_method = X264_RC_CRF; p.rc.f_rf_constant = Float(crf)
        } else {
            throw fail("neither crf nor bitrateKbps is set; set one")
        }
        if x264_param_apply_profile(&p, settings.profile) < 0 {
            if !Self.profiles.contains(settings.profile) {
                throw fail("unknown profile '\(settings.profile)' (valid: \(Self.profiles.joined(separator: ", ")))")
            }
            throw fail("profile '\(settings.profile)' cannot encode these settings (crf 0 is lossless, which only high444 supports)")
        }
        guard let h = creel_x264_encoder_open(&p) else {
            throw fail("x264_encoder_open rejected \(width)x\(height) @ \(fps) fps with preset \(settings.preset) (see x264's warning above)")
        }
        handle = h
        self.width = width; self.height = height; self.fps = fps
        frameDuration = rescale(90_000 * fps.den, 1, fps.num)

        var nals: UnsafeMutablePointer<x264_nal_t>? = nil
        var count: Int32 = 0
        guard x264_encoder_headers(h, &nals, &count) >= 0, let nals else {
            x264_encoder_close(h)
            throw fail("x264_encoder_headers failed")
        }
        var sps: [UInt8] = [], pps: [UInt8] = []
        for i in 0..<Int(count) {
            // Safe: x264 returned `count` NALs, each p_payload valid for i_payload bytes until the next x264 call.
            let nal = UnsafeBufferPointer(start: nals[i].p_payload, count: Int(nals[i].i_payload)).dropFirst(4) // drop the length prefix
            switch nal.first.map({ $0 & 0x1f }) {
            case 7: sps = Array(nal)
            case 8: pps = Array(nal)
            default: break // the SEI with x264's version string is not needed
            }
        }
        guard sps.count >= 4, !pps.isEmpty else { x264_encoder_close(h); throw fail("x264 produced no SPS/PPS headers") }
        avcC = Self.makeAVCC(sps: sps, pps: pps)
        x264_picture_init(&picIn)
        picIn.img.i_csp = X264_CSP_I420
        picIn.img.i_plane = 3
    }

    deinit { x264_encoder_close(handle) }

    /// Encodes one frame. `pts` is in 1/90000 and must increase strictly.
    public func encode(_ frame: I420Frame, pts: Int64, _ emit: (Packet) throws -> Void) throws {
        guard !flushed else { throw MediaError("H264Encoder.encode called after flush; create a new encoder") }
        guard frame.width == width, frame.height == height else {
            throw MediaError("H264Encoder got a \(frame.width)x\(frame.height) frame but was opened for \(width)x\(height)")
        }
        if let lastPts, pts <= lastPts {
            throw MediaError("H264Encoder got pts \(pts) after \(lastPts); video pts must increase strictly")
        }
        lastPts = pts
        // Safe: x264 only reads input planes (the field is non-const in C); they outlive this call.
        picIn.img.plane.0 = UnsafeMutablePointer(mutating: frame.y)
        picIn.img.plane.1 = UnsafeMutablePointer(mutating: frame.u)
        picIn.img.plane.2 = UnsafeMutablePointer(mutating: frame.v)
        picIn.img.i_stride.0 = Int32(frame.strideY)
        picIn.img.i_stride.1 = Int32(frame.strideU)
        picIn.img.i_stride.2 = Int32(frame.strideV)
        picIn.i_pts = pts
        picIn.i_type = X264_TYPE_AUTO
        try encodeStep(withPicture: true, emit)
    }

    /// Drains the frames x264 still holds (lookahead, B-frames). Call once at the end.
    public func flush(_ emit: (Packet) throws -> Void) throws {
        flushed = true
        while x264_encoder_delayed_frames(handle) > 0 {
            try encodeStep(withPicture: false, emit)
        }
    }

    private func encodeStep(withPicture: Bool, _ emit: (Packet) throws -> Void) throws {
        var nals: UnsafeMutablePointer<x264_nal_t>? = nil
        var count: Int32 = 0
        let size = withPicture ? x264_encoder_encode(handle, &nals, &count, &picIn, &picOut)
                               : x264_encoder_encode(handle, &nals, &count, nil, &picOut)
        guard size >= 0 else { throw MediaError("x264_encoder_encode failed (code \(size)) at pts \(picIn.i_pts)") }
        guard size > 0, let nals else { return }
        // Safe: x264 lays out all NAL payloads of one call contiguously, `size` bytes from the first,
        // valid until the next x264 call; the Packet does not outlive `emit`.
        let data = UnsafeRawBufferPointer(start: nals[0].p_payload, count: Int(size))
        try emit(Packet(data: data, pts: picOut.i_pts, dts: picOut.i_dts, duration: frameDuration,
                        isKeyframe: picOut.b_keyframe != 0))
    }

    /// ISO/IEC 14496-15 AVCDecoderConfigurationRecord for one SPS and one PPS, 4-byte NAL lengths.
    static func makeAVCC(sps: [UInt8], pps: [UInt8]) -> [UInt8] {
        var r: [UInt8] = [1, sps[1], sps[2], sps[3], 0xFF, 0xE1]
        r += [UInt8(sps.count >> 8), UInt8(sps.count & 0xff)] + sps
        r += [1, UInt8(pps.count >> 8), UInt8(pps.count & 0xff)] + pps
        if [100, 110, 122, 144].contains(sps[1]) {
            r += [0xFC | 1, 0xF8 | 0, 0xF8 | 0, 0]  // chroma 4:2:0, 8-bit luma and chroma, no SPS extensions
        }
        return r
    }
}
