internal import CTurboJPEG
internal import CYUV

/// Decodes one MJPEG frame (a JPEG image) with libturbojpeg straight into a tightly packed I420
/// buffer of the caller's (a pool slot). 4:2:0 JPEGs decode directly into the slot; 4:2:2,
/// 4:4:4 and greyscale (what webcams send) decode to planes this decoder owns, then libyuv
/// subsamples them. JPEG (JFIF) samples are full range; the output is converted to the limited
/// (video) range H.264 assumes. One owner of the `tjhandle`; used by one thread at a time.
public final class MJPEGDecoder {
    public let width: Int
    public let height: Int
    private let handle: tjhandle
    // Owned scratch planes (w*h each), allocated once in init, freed in deinit.
    private let scratch: UnsafeMutablePointer<UInt8>
    // Owned 3-entry plane-pointer and stride arrays for libturbojpeg (no per-frame allocation).
    private let planePtrs: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>
    private let strides: UnsafeMutablePointer<Int32>
    /// Full-to-limited range tables: Y 0...255 -> 16...235, Cb/Cr 0...255 -> 16...240.
    private let lumaRange: [UInt8] = (0..<256).map { UInt8(16 + ($0 * 219 + 127) / 255) }
    private let chromaRange: [UInt8] = (0..<256).map { UInt8(16 + ($0 * 224 + 127) / 255) }

    public init(width: Int, height: Int) throws {
        guard width > 0, height > 0, width % 2 == 0, height % 2 == 0 else {
            throw MediaError("cannot create MJPEG decoder: size \(width)x\(height) is not positive and even")
        }
        guard let h = tjInitDecompress() else {
            throw MediaError("cannot create MJPEG decoder: tjInitDecompress failed (is libturbojpeg installed?)")
        }
        self.width = width; self.height = height; handle = h
        scratch = .allocate(capacity: width * height * 3)
        planePtrs = .allocate(capacity: 3)
        planePtrs.initialize(repeating: nil, count: 3)
        strides = .allocate(capacity: 3)
        strides.initialize(repeating: 0, count: 3)
    }

    deinit { tjDestroy(handle); scratch.deallocate(); planePtrs.deallocate(); strides.deallocate() }

    private func decodePlanes(_ src: UnsafePointer<UInt8>, _ count: Int, _ p: (UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<UInt8>), chromaStride: Int) throws {
        planePtrs[0] = p.0; planePtrs[1] = p.1; planePtrs[2] = p.2
        strides[0] = Int32(width); strides[1] = Int32(chromaStride); strides[2] = Int32(chromaStride)
        guard tjDecompressToYUVPlanes(handle, src, UInt(count), planePtrs, Int32(width), strides, Int32(height), 0) == 0 else {
            throw MediaError("corrupt MJPEG frame: \(errorText())")
        }
    }

    /// Bytes of the I420 output (`width*height*3/2`).
    public var outputBytes: Int { width * height * 3 / 2 }

    /// Decodes `jpeg` into `dst` (at least `outputBytes`). Throws on a corrupt frame or a
    /// frame of the wrong size; the caller drops the frame.
    public func decode(_ jpeg: UnsafeRawBufferPointer, into dst: UnsafeMutableRawBufferPointer) throws {
        guard let src = jpeg.baseAddress?.assumingMemoryBound(to: UInt8.self), jpeg.count > 0 else {
            throw MediaError("MJPEG frame is empty")
        }
        guard dst.count >= outputBytes, let out = dst.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw MediaError("MJPEG output buffer holds \(dst.count) bytes, need \(outputBytes)")
        }
        var w: Int32 = 0, h: Int32 = 0, subsamp: Int32 = 0, colorspace: Int32 = 0
        guard tjDecompressHeader3(handle, src, UInt(jpeg.count), &w, &h, &subsamp, &colorspace) == 0 else {
            throw MediaError("corrupt MJPEG frame: \(errorText())")
        }
        guard Int(w) == width, Int(h) == height else {
            throw MediaError("MJPEG frame is \(w)x\(h), expected \(width)x\(height)")
        }
        let (W, H, cw) = (Int32(width), Int32(height), Int32(width / 2))
        // Safe: out holds outputBytes = Y (w*h) + U, V ((w/2)*(h/2) each), exactly these planes.
        let y = out, u = out + width * height, v = u + (width / 2) * (height / 2)
        if subsamp == Int32(TJSAMP_420.rawValue) {
            try decodePlanes(src, jpeg.count, (y, u, v), chromaStride: width / 2)
            toLimitedRange(out)
            return
        }
        // Other subsamplings: full-size scratch planes (enough for 4:4:4), then libyuv.
        let chromaW: Int, chromaH: Int
        switch subsamp {
        case Int32(TJSAMP_422.rawValue): (chromaW, chromaH) = (width / 2, height)
        case Int32(TJSAMP_444.rawValue): (chromaW, chromaH) = (width, height)
        case Int32(TJSAMP_GRAY.rawValue): (chromaW, chromaH) = (0, 0)
        default: throw MediaError("MJPEG frame uses chroma subsampling \(subsamp), which Reel cannot convert (use --pixel-format yuyv)")
        }
        // Safe: scratch has 3*w*h bytes; Y uses w*h, U and V at most w*h each.
        let sy = scratch, su = scratch + width * height, sv = su + width * height
        try decodePlanes(src, jpeg.count, (sy, su, sv), chromaStride: chromaW)
        let r: Int32
        switch (chromaW, chromaH) {
        case (0, 0): r = I400ToI420(sy, W, y, W, u, cw, v, cw, W, H)
        case (width, height): r = I444ToI420(sy, W, su, W, sv, W, y, W, u, cw, v, cw, W, H)
        default: r = I422ToI420(sy, W, su, cw, sv, cw, y, W, u, cw, v, cw, W, H)
        }
        guard r == 0 else { throw MediaError("libyuv failed to subsample a \(width)x\(height) MJPEG frame (code \(r))") }
        toLimitedRange(out)
    }

    /// Maps the decoded full-range I420 in place to limited range.
    private func toLimitedRange(_ p: UnsafeMutablePointer<UInt8>) {
        let ySize = width * height, total = outputBytes
        lumaRange.withUnsafeBufferPointer { ly in
            for i in 0..<ySize { p[i] = ly[Int(p[i])] }
        }
        chromaRange.withUnsafeBufferPointer { lc in
            for i in ySize..<total { p[i] = lc[Int(p[i])] }
        }
    }

    private func errorText() -> String {
        guard let s = tjGetErrorStr2(handle) else { return "unknown libturbojpeg error" }
        return String(cString: s)
    }
}
