internal import CTurboJPEG
internal import CYUV
import ReelCore

/// `reelctl snapshot`: one captured frame (as a pool slot holds it: yuyv, uyvy, nv12, i420 or
/// i422) as a baseline JPEG, optionally scaled down to a width first (libyuv box filter). The
/// frame is converted to I420 (libyuv), from the limited (video) range cameras and the encoder
/// use to the full range JPEG (JFIF) means, and compressed 4:2:0 by libturbojpeg. A snapshot is
/// a request, not the capture path: it allocates what it needs each time and is used by one
/// thread at a time.
public enum SnapshotEncoder {
    /// The largest JPEG reeld sends (8 MiB; base64 in the reply makes it about 11 MB, under the
    /// client's 16 MiB reply limit).
    public static let maxJPEGBytes = 8 << 20
    /// The smallest width `--width` may ask for.
    public static let minWidth = PreviewLimits.minWidth

    /// The size a frame of `width`x`height` has when scaled to `target` columns (nil: as is):
    /// the height in proportion, rounded to even. Nil when `target` is out of range
    /// (`minWidth`...`width`: a snapshot is never scaled up).
    public static func scaledSize(width: Int, height: Int, target: Int?) -> (width: Int, height: Int)? {
        guard let target else { return (width, height) }
        return PreviewGrant.scaledSize(width: width, height: height, target: target)
    }

    /// Encodes `frame` (exactly `format.frameBytes(width:height:)` bytes) as a JPEG of `quality`
    /// (1...100), scaled to `targetWidth` columns when given.
    public static func encode(_ frame: UnsafeRawBufferPointer, width: Int, height: Int, format: PixelFormat,
                              targetWidth: Int? = nil, quality: Int = 90) throws -> (jpeg: [UInt8], width: Int, height: Int) {
        guard let out = scaledSize(width: width, height: height, target: targetWidth) else {
            throw MediaError("cannot scale a \(width)x\(height) snapshot to width \(targetWidth ?? 0): use a width from \(minWidth) to \(width) (a snapshot is never enlarged)")
        }
        let converter = try PixelConverter(width: width, height: height, from: format)
        var i420 = [UInt8](repeating: 0, count: width * height * 3 / 2)
        try i420.withUnsafeMutableBytes { try converter.convert(frame, into: $0) }
        var planes = i420
        if out.width != width || out.height != height {
            planes = [UInt8](repeating: 0, count: out.width * out.height * 3 / 2)
            let rc: Int32 = i420.withUnsafeBufferPointer { s in
                planes.withUnsafeMutableBufferPointer { d in
                    // Safe: both buffers hold exactly Y (w*h) then U and V ((w/2)*(h/2) each) of their sizes.
                    let (sw, sh, dw, dh) = (width, height, out.width, out.height)
                    let sy = s.baseAddress!, su = sy + sw * sh, sv = su + (sw / 2) * (sh / 2)
                    let dy = d.baseAddress!, du = dy + dw * dh, dv = du + (dw / 2) * (dh / 2)
                    return I420Scale(sy, Int32(sw), su, Int32(sw / 2), sv, Int32(sw / 2), Int32(sw), Int32(sh),
                                     dy, Int32(dw), du, Int32(dw / 2), dv, Int32(dw / 2), Int32(dw), Int32(dh), kFilterBox)
                }
            }
            guard rc == 0 else { throw MediaError("libyuv failed to scale a \(width)x\(height) snapshot to \(out.width)x\(out.height) (code \(rc))") }
        }
        toFullRange(&planes, lumaCount: out.width * out.height)
        return (try compress(planes, width: out.width, height: out.height, quality: quality), out.width, out.height)
    }

    /// Limited range (Y 16...235, Cb/Cr 16...240) to full range 0...255, in place.
    static func toFullRange(_ p: inout [UInt8], lumaCount: Int) {
        let luma: [UInt8] = (0..<256).map { UInt8(clamping: (($0 - 16) * 255 + 109) / 219) }
        let chroma: [UInt8] = (0..<256).map { UInt8(clamping: 128 + (($0 - 128) * 255 + ($0 >= 128 ? 112 : -112)) / 224) }
        for i in 0..<p.count { p[i] = i < lumaCount ? luma[Int(p[i])] : chroma[Int(p[i])] }
    }

    private static func compress(_ planes: [UInt8], width: Int, height: Int, quality: Int) throws -> [UInt8] {
        guard let handle = tjInitCompress() else {
            throw MediaError("cannot create the JPEG encoder: tjInitCompress failed (is libturbojpeg installed?)")
        }
        defer { tjDestroy(handle) }
        // Unsafe: libturbojpeg allocates the output (freed with tjFree below, after the copy).
        var jpeg: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        let rc: Int32 = planes.withUnsafeBufferPointer { p in
            // Safe: p holds exactly the Y, U and V planes of a width x height I420 image.
            let y = p.baseAddress!, u = y + width * height, v = u + (width / 2) * (height / 2)
            var ptrs: [UnsafePointer<UInt8>?] = [y, u, v]
            var strides: [Int32] = [Int32(width), Int32(width / 2), Int32(width / 2)]
            return tjCompressFromYUVPlanes(handle, &ptrs, Int32(width), &strides, Int32(height), Int32(TJSAMP_420.rawValue),
                                           &jpeg, &size, Int32(quality), 0)
        }
        defer { if let jpeg { tjFree(jpeg) } }
        guard rc == 0, let jpeg, size > 0 else {
            let why = tjGetErrorStr2(handle).map { String(cString: $0) } ?? "unknown libturbojpeg error"
            throw MediaError("cannot encode a \(width)x\(height) snapshot as JPEG: \(why)")
        }
        return Array(UnsafeBufferPointer(start: jpeg, count: Int(size)))
    }
}
