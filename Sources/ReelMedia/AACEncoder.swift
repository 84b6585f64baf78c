internal import CFFmpeg
internal import CFFmpegShim
internal import ReelFFmpeg
import ReelCore

/// AAC-LC with libavcodec's native "aac" encoder. Takes interleaved S16 in any chunk size, converts to
/// FLTP with libswresample straight into a reused 1024-sample AVFrame, and stamps each frame with the
/// count of samples before it, so input sample k has output time k / sampleRate. The encoder's priming
/// (`initialPadding`) shows up as negative pts on the first packet; MP4Writer turns it into an edit list.
/// What a file's audio track says of its AAC stream (every encoder with the same settings says the same).
public struct AACStream: Sendable {
    public let format: AudioFormat
    public let timeBase: Rational
    public let frameSize: Int
    public let extradata: [UInt8]
    public let initialPadding: Int
}

public final class AACEncoder {
    /// The most channels Reel records, each full-band (`ChannelLayout`: from 6 on, FFmpeg's layouts
    /// carry an LFE, which AAC low-passes).
    public static var maxChannels: Int { ChannelLayout.maxChannels }
    public static let sampleRates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]

    public let format: AudioFormat
    /// The bitrate asked for, lowered to what AAC can carry for `format` (`maxBitrate`).
    public let bitrate: Int
    public let timeBase: Rational
    /// Samples per channel in one AAC frame (1024).
    public let frameSize: Int
    /// AudioSpecificConfig (the encoder is opened with AV_CODEC_FLAG_GLOBAL_HEADER).
    public let extradata: [UInt8]
    /// Priming samples a decoder must drop (1024 for this encoder).
    public let initialPadding: Int

    private let ctx: CodecContext
    private let swr: Resampler
    private let frame: Frame          // reused for every 1024-sample frame
    private let packet: AVPacketBox   // reused for every output packet
    private let outPlanes: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>  // owned (deinit), one per channel
    private var fill = 0                  // samples per channel already in `frame`
    private var samplesQueued: Int64 = 0  // samples per channel handed to the encoder so far
    private var flushed = false

    public var stream: AACStream {
        AACStream(format: format, timeBase: timeBase, frameSize: frameSize, extradata: extradata, initialPadding: initialPadding)
    }

    /// The most AAC carries: 6144 bits per channel in a frame of 1024 samples (96000 b/s at 16 kHz
    /// mono). libavcodec lowers a higher rate to it itself, with a warning on every open.
    public static func maxBitrate(_ f: AudioFormat) -> Int { 6144 * f.channels * f.sampleRate / 1024 }

    public init(format: AudioFormat, settings: AACSettings) throws {
        let what = "cannot open AAC encoder"
        guard Self.sampleRates.contains(format.sampleRate) else {
            throw MediaError("\(what): sample rate \(format.sampleRate) Hz is not an AAC rate (valid: \(Self.sampleRates.map(String.init).joined(separator: ", ")))")
        }
        guard (1...ChannelLayout.maxChannels).contains(format.channels) else {
            throw MediaError("\(what): \(format.channels) channels; Reel records 1 to \(ChannelLayout.maxChannels), each full-band (6 to 8 would make one a low-passed LFE)")
        }
        guard settings.bitrate > 0 else { throw MediaError("\(what): bitrate \(settings.bitrate) must be positive") }
        guard let codec = avcodec_find_encoder_by_name("aac") else {
            throw MediaError("\(what): this libavcodec has no native 'aac' encoder")
        }
        let ctx = try CodecContext(codec, what)
        let c = ctx.p
        c.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
        c.pointee.sample_rate = Int32(format.sampleRate)
        ChannelLayout.set(&c.pointee.ch_layout, channels: format.channels)
        bitrate = min(settings.bitrate, Self.maxBitrate(format))
        c.pointee.bit_rate = Int64(bitrate)
        c.pointee.time_base = AVRational(num: 1, den: Int32(format.sampleRate))
        c.pointee.profile = FF_PROFILE_AAC_LOW
        c.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER
        try checkAV(avcodec_open2(c, codec, nil), "\(what) (\(format.sampleRate) Hz, \(format.channels) ch, \(bitrate) b/s)")

        var swrp: OpaquePointer? = nil
        var inLayout = AVChannelLayout()
        ChannelLayout.set(&inLayout, channels: format.channels)
        try checkAV(swr_alloc_set_opts2(&swrp, &c.pointee.ch_layout, AV_SAMPLE_FMT_FLTP, c.pointee.sample_rate,
                                        &inLayout, AV_SAMPLE_FMT_S16, c.pointee.sample_rate, 0, nil),
                    "\(what): cannot configure libswresample S16 -> FLTP")
        guard let swrp else { throw MediaError("\(what): libswresample returned no context") }
        let swr = Resampler(swrp)
        try checkAV(swr_init(swr.p), "\(what): cannot initialise libswresample S16 -> FLTP")

        let frame = try Frame(what)
        frameSize = c.pointee.frame_size > 0 ? Int(c.pointee.frame_size) : 1024
        frame.p.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
        frame.p.pointee.nb_samples = Int32(frameSize)
        frame.p.pointee.sample_rate = c.pointee.sample_rate
        try checkAV(av_channel_layout_copy(&frame.p.pointee.ch_layout, &c.pointee.ch_layout), "\(what): cannot copy the channel layout")
        try checkAV(av_frame_get_buffer(frame.p, 0), "\(what): cannot allocate the sample buffer")

        self.packet = try AVPacketBox(what)
        self.ctx = ctx; self.swr = swr; self.frame = frame; self.format = format
        timeBase = Rational(1, Int64(format.sampleRate))
        initialPadding = Int(c.pointee.initial_padding)
        // Safe: with GLOBAL_HEADER, avcodec_open2 set extradata to extradata_size valid bytes.
        extradata = c.pointee.extradata.map { Array(UnsafeBufferPointer(start: $0, count: Int(c.pointee.extradata_size))) } ?? []
        outPlanes = .allocate(capacity: format.channels)
        outPlanes.initialize(repeating: nil, count: format.channels)
    }

    deinit { outPlanes.deallocate() }

    /// Appends interleaved S16 samples (a multiple of `channels` values); emits every AAC packet that completes.
    public func encode(interleaved: UnsafeBufferPointer<Int16>, _ emit: (Packet) throws -> Void) throws {
        guard !flushed else { throw MediaError("AACEncoder.encode called after flush; create a new encoder") }
        let ch = format.channels
        guard interleaved.count % ch == 0 else {
            throw MediaError("AACEncoder got \(interleaved.count) values, not a whole number of \(ch)-channel frames")
        }
        guard var src = interleaved.baseAddress.map(UnsafeRawPointer.init) else { return }
        var remaining = interleaved.count / ch
        while remaining > 0 {
            if fill == 0 {
                try checkAV(av_frame_make_writable(frame.p), "AAC encoder: cannot make the input frame writable")
            }
            let take = min(frameSize - fill, remaining)
            for c in 0..<ch {
                // Safe: the frame holds frameSize floats per plane and fill + take <= frameSize.
                outPlanes[c] = frame.p.pointee.extended_data[c]! + fill * 4
            }
            // Safe: src points at `take * ch` readable Int16 values inside `interleaved`.
            var inPtr: UnsafePointer<UInt8>? = src.assumingMemoryBound(to: UInt8.self)
            let n = swr_convert(swr.p, outPlanes, Int32(take), &inPtr, Int32(take))
            guard n == Int32(take) else {
                throw MediaError("AAC encoder: libswresample converted \(n) of \(take) samples" + (n < 0 ? ": \(avErrorText(n))" : ""))
            }
            fill += take; remaining -= take
            src += take * ch * 2
            if fill == frameSize { try sendFrame(emit) }
        }
    }

    /// Encodes the last partial frame, then drains the encoder. Call once at the end.
    public func flush(_ emit: (Packet) throws -> Void) throws {
        guard !flushed else { return }
        flushed = true
        if fill > 0 {
            frame.p.pointee.nb_samples = Int32(fill)  // the native encoder accepts a short last frame
            try sendFrame(emit)
        }
        try checkAV(avcodec_send_frame(ctx.p, nil), "AAC encoder: cannot start draining")
        try receive(emit)
    }

    private func sendFrame(_ emit: (Packet) throws -> Void) throws {
        frame.p.pointee.pts = samplesQueued
        samplesQueued += Int64(frame.p.pointee.nb_samples)
        fill = 0
        try checkAV(avcodec_send_frame(ctx.p, frame.p), "AAC encoder: cannot encode the frame at sample \(frame.p.pointee.pts)")
        try receive(emit)
    }

    private func receive(_ emit: (Packet) throws -> Void) throws {
        let p = packet.p
        while true {
            let rc = avcodec_receive_packet(ctx.p, p)
            if rc == creel_averror_eagain() || rc == creel_averror_eof() { return }
            try checkAV(rc, "AAC encoder: cannot receive a packet")
            defer { av_packet_unref(p) }
            // Safe: the packet's data stays valid until av_packet_unref, after `emit` returns.
            try emit(Packet(data: UnsafeRawBufferPointer(start: p.pointee.data, count: Int(p.pointee.size)),
                            pts: p.pointee.pts, dts: p.pointee.dts, duration: p.pointee.duration, isKeyframe: true))
        }
    }
}
