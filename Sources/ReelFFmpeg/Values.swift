package import CFFmpeg
package import ReelCore

/// `av_strerror` text for an FFmpeg return code.
package func avErrorText(_ code: Int32) -> String {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 256) { buf in
        // Safe: buf has 256 bytes and av_strerror NUL-terminates within the given size.
        guard let base = buf.baseAddress, av_strerror(code, base, 256) == 0 else { return "FFmpeg error \(code)" }
        return String(cString: base)
    }
}

extension Rational {
    /// FFmpeg's rational as Reel's exact one; nil for FFmpeg's "unknown" (a 0 numerator or
    /// denominator: the 0/0 of a stream with no frame rate).
    package init?(_ r: AVRational) {
        guard r.num != 0, r.den != 0 else { return nil }
        self.init(Int64(r.num), Int64(r.den))
    }
}
