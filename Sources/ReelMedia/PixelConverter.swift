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

    /// Converts `src` (exactly `format.frameBytes(width:height:)` bytes). The result is valid until the next call.
    public func convert(_ src: UnsafeRawBufferPointer) throws -> I420Frame {
        let need = format.frameBytes(width: width, height: height)
        guard src.count == need, let s = src.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw MediaError("cannot convert \(format) frame: got \(src.count) bytes, a \(width)x\(height) \(format) frame is \(need) bytes (check the source format and size)")
        }
        // Safe: the buffer holds w*h (Y) + 2 * (w/2)*(h/2) (U, V) bytes, exactly what these pointers address.
        let (w, h, cw) = (Int32(width), Int32(height), Int32(width / 2))
        let y = buffer, u = buffer + width * height, v = u + (width / 2) * (height / 2)
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
        return I420Frame(y: y, u: u, v: v, strideY: width, strideU: width / 2, strideV: width / 2, width: width, height: height)
    }
}
