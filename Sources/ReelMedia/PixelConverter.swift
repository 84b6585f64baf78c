internal import CYUV
import ReelCore

/// Converts one tightly packed source frame (yuyv, uyvy, i420, nv12, i422) into an I420 buffer it owns, with libyuv.
public final class PixelConverter {
    public let width: Int
    public let height: Int
    public let format: PixelFormat
    private let buffer: UnsafeMutablePointer<UInt8>  // owned: allocated in init, freed in deinit

    public init(width: Int, height: Int, from format: PixelFormat) throws {
        guard width > 0, height > 0, width % 2 == 0, height % 2 == 0 else {
            throw MediaError("cannot create pixel converter: size \(width)x\(height) is not positive and even; I420 needs even width and height")
        }
        self.width = width; self.height = height; self.format = format
        buffer = .allocate(capacity: width * height * 3 / 2)
    }

    deinit { buffer.deallocate() }

    /// Converts `src` (exactly `format.frameBytes(width:height:)` bytes). The result is valid until
    /// the next call. I420 input is not copied: the result views `src` itself (valid while `src` is).
    public func convert(_ src: UnsafeRawBufferPointer) throws -> I420Frame {
        if format == .i420 {
            try check(src)
            // Safe: src holds exactly w*h*3/2 bytes (checked), the Y, U and V planes in that order.
            return planes(src.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        try convert(src, into: UnsafeMutableRawBufferPointer(start: buffer, count: width * height * 3 / 2))
        return planes(UnsafePointer(buffer))
    }

    /// The Y, U and V planes of a tightly packed I420 frame starting at `base`.
    private func planes(_ base: UnsafePointer<UInt8>) -> I420Frame {
        I420Frame(y: base, u: base + width * height, v: base + width * height + (width / 2) * (height / 2),
                  strideY: width, strideU: width / 2, strideV: width / 2, width: width, height: height)
    }

    /// Converts `src` into `dst`, a tightly packed I420 frame (exactly w*h*3/2 bytes): for a source
    /// thread that hands the pipeline frames already in I420.
    public func convert(_ src: UnsafeRawBufferPointer, into dst: UnsafeMutableRawBufferPointer) throws {
        try check(src)
        guard dst.count == width * height * 3 / 2, let d = dst.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw MediaError("cannot convert \(format) frame: the I420 buffer has \(dst.count) bytes, a \(width)x\(height) I420 frame is \(width * height * 3 / 2)")
        }
        let s = src.baseAddress!.assumingMemoryBound(to: UInt8.self)
        // Safe: dst holds w*h (Y) + 2 * (w/2)*(h/2) (U, V) bytes, exactly what these pointers address.
        let (w, h, cw) = (Int32(width), Int32(height), Int32(width / 2))
        let y = d, u = d + width * height, v = u + (width / 2) * (height / 2)
        let rc: Int32
        switch format {
        case .yuyv: rc = YUY2ToI420(s, w * 2, y, w, u, cw, v, cw, w, h)
        case .uyvy: rc = UYVYToI420(s, w * 2, y, w, u, cw, v, cw, w, h)
        case .i420:
            // Safe: src.count == w*h*3/2 was checked above, so the U and V planes lie inside src.
            let su = s + width * height, sv = su + (width / 2) * (height / 2)
            rc = I420Copy(s, w, su, cw, sv, cw, y, w, u, cw, v, cw, w, h)
        case .nv12:
            rc = NV12ToI420(s, w, s + width * height, w, y, w, u, cw, v, cw, w, h)  // Safe: size checked above.
        case .i422:
            // Safe: src.count == w*h*2 was checked above: Y (w*h), then U and V of (w/2)*h each.
            let su = s + width * height, sv = su + (width / 2) * height
            rc = I422ToI420(s, w, su, cw, sv, cw, y, w, u, cw, v, cw, w, h)
        }
        guard rc == 0 else { throw MediaError("libyuv failed to convert a \(width)x\(height) \(format) frame (code \(rc))") }
    }

    private func check(_ src: UnsafeRawBufferPointer) throws {
        let need = format.frameBytes(width: width, height: height)
        guard src.count == need, src.baseAddress != nil else {
            throw MediaError("cannot convert \(format) frame: got \(src.count) bytes, a \(width)x\(height) \(format) frame is \(need) bytes (check the source format and size)")
        }
    }
}
