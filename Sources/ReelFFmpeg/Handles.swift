package import CFFmpeg

// One owner per FFmpeg handle, for every module that calls FFmpeg (ReelMedia, ReelVerify): each
// box frees its pointer exactly once in deinit, so an init that throws halfway frees whatever it
// had already allocated just by letting the boxes go. A handle that cannot be had throws the
// caller's own error, made by `failure` from the reason ("out of memory allocating an AVFrame",
// or av_strerror's text); the caller's error names the file or encoder and the fix.

package final class CodecContext {
    package let p: UnsafeMutablePointer<AVCodecContext>
    package init<E: Error>(_ codec: UnsafePointer<AVCodec>, failure: (_ reason: String) -> E) throws(E) {
        guard let p = avcodec_alloc_context3(codec) else { throw failure("out of memory allocating a codec context") }
        self.p = p
    }
    deinit { var p: UnsafeMutablePointer<AVCodecContext>? = p; avcodec_free_context(&p) }
}

package final class Frame {
    package let p: UnsafeMutablePointer<AVFrame>
    package init<E: Error>(failure: (_ reason: String) -> E) throws(E) {
        guard let p = av_frame_alloc() else { throw failure("out of memory allocating an AVFrame") }
        self.p = p
    }
    deinit { var p: UnsafeMutablePointer<AVFrame>? = p; av_frame_free(&p) }
}

package final class AVPacketBox {
    package let p: UnsafeMutablePointer<AVPacket>
    package init<E: Error>(failure: (_ reason: String) -> E) throws(E) {
        guard let p = av_packet_alloc() else { throw failure("out of memory allocating an AVPacket") }
        self.p = p
    }
    deinit { var p: UnsafeMutablePointer<AVPacket>? = p; av_packet_free(&p) }
}

package final class Resampler {
    package let p: OpaquePointer  // SwrContext*
    package init(_ p: OpaquePointer) { self.p = p }
    deinit { var p: OpaquePointer? = p; swr_free(&p) }
}

/// An input AVFormatContext: `path` opened with avformat_open_input (`format` nil: probed),
/// closed with avformat_close_input.
package final class InputContext {
    package let p: UnsafeMutablePointer<AVFormatContext>
    package init<E: Error>(path: String, format: UnsafePointer<AVInputFormat>?, failure: (_ reason: String) -> E) throws(E) {
        var p: UnsafeMutablePointer<AVFormatContext>? = nil
        let rc = avformat_open_input(&p, path, format, nil)   // frees p itself when it fails
        guard rc >= 0 else { throw failure(avErrorText(rc)) }
        guard let p else { throw failure("libavformat opened no context") }
        self.p = p
    }
    deinit { var p: UnsafeMutablePointer<AVFormatContext>? = p; avformat_close_input(&p) }
}

/// An output AVFormatContext and the custom AVIOContext (avio_alloc_context) its owner gives it
/// in `pb`: freed here with its buffer, never flushed (the owner decides what reaches the file).
package final class OutputContext {
    package let p: UnsafeMutablePointer<AVFormatContext>
    package init<E: Error>(format: String, path: String, failure: (_ reason: String) -> E) throws(E) {
        var p: UnsafeMutablePointer<AVFormatContext>? = nil
        let rc = avformat_alloc_output_context2(&p, nil, format, path)
        guard rc >= 0 else { throw failure("cannot create the \(format) muxer: \(avErrorText(rc))") }
        guard let p else { throw failure("libavformat returned no \(format) muxer") }
        self.p = p
    }
    /// Frees `pb` and its buffer without writing anything more. Idempotent.
    package func freeIO() {
        guard let pb = p.pointee.pb else { return }
        av_freep(&pb.pointee.buffer)
        avio_context_free(&p.pointee.pb)
    }
    deinit {
        freeIO()
        avformat_free_context(p)
    }
}
