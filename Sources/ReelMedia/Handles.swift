internal import CFFmpeg
internal import ReelFFmpeg

// FFmpeg's handles live in ReelFFmpeg (shared with ReelVerify). ReelMedia's shorthands: a handle
// that cannot be had throws `MediaError("\(what): <reason>")`, as `checkAV` does.

extension MediaError {
    /// The `failure` ReelFFmpeg's handles take: "\(what): <reason>".
    static func failing(_ what: String) -> (_ reason: String) -> MediaError { { MediaError("\(what): \($0)") } }
}

extension CodecContext {
    convenience init(_ codec: UnsafePointer<AVCodec>, _ what: String) throws(MediaError) {
        try self.init(codec, failure: MediaError.failing(what))
    }
}

extension Frame {
    convenience init(_ what: String) throws(MediaError) { try self.init(failure: MediaError.failing(what)) }
}

extension AVPacketBox {
    convenience init(_ what: String) throws(MediaError) { try self.init(failure: MediaError.failing(what)) }
}

extension OutputContext {
    convenience init(format: String, path: String, _ what: String) throws(MediaError) {
        try self.init(format: format, path: path, failure: MediaError.failing(what))
    }
}
