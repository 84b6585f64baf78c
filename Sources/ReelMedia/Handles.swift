internal import CFFmpeg
internal import CFFmpegShim

// One owner per FFmpeg handle: each box frees its pointer exactly once in deinit, so an init that
// throws halfway frees whatever it had already allocated just by letting the boxes go.

final class CodecContext {
    let p: UnsafeMutablePointer<AVCodecContext>
    init(_ codec: UnsafePointer<AVCodec>, _ what: String) throws(MediaError) {
        guard let p = avcodec_alloc_context3(codec) else { throw MediaError("\(what): out of memory allocating a codec context") }
        self.p = p
    }
    deinit { var p: UnsafeMutablePointer<AVCodecContext>? = p; avcodec_free_context(&p) }
}

final class Frame {
    let p: UnsafeMutablePointer<AVFrame>
    init(_ what: String) throws(MediaError) {
        guard let p = av_frame_alloc() else { throw MediaError("\(what): out of memory allocating an AVFrame") }
        self.p = p
    }
    deinit { var p: UnsafeMutablePointer<AVFrame>? = p; av_frame_free(&p) }
}

final class AVPacketBox {
    let p: UnsafeMutablePointer<AVPacket>
    init(_ what: String) throws(MediaError) {
        guard let p = av_packet_alloc() else { throw MediaError("\(what): out of memory allocating an AVPacket") }
        self.p = p
    }
    deinit { var p: UnsafeMutablePointer<AVPacket>? = p; av_packet_free(&p) }
}

final class Resampler {
    let p: OpaquePointer  // SwrContext*
    init(_ p: OpaquePointer) { self.p = p }
    deinit { var p: OpaquePointer? = p; swr_free(&p) }
}

/// An output AVFormatContext and the custom AVIOContext (avio_alloc_context) its owner gives it
/// in `pb`: freed here with its buffer, never flushed (the owner decides what reaches the file).
final class OutputContext {
    let p: UnsafeMutablePointer<AVFormatContext>
    init(format: String, path: String, _ what: String) throws(MediaError) {
        var p: UnsafeMutablePointer<AVFormatContext>? = nil
        try checkAV(avformat_alloc_output_context2(&p, nil, format, path), "\(what): cannot create the \(format) muxer")
        guard let p else { throw MediaError("\(what): libavformat returned no \(format) muxer") }
        self.p = p
    }
    /// Frees `pb` and its buffer without writing anything more. Idempotent.
    func freeIO() {
        guard let pb = p.pointee.pb else { return }
        av_freep(&pb.pointee.buffer)
        avio_context_free(&p.pointee.pb)
    }
    deinit {
        freeIO()
        avformat_free_context(p)
    }
}
