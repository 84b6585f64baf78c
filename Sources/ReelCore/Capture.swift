/// Pure capture logic shared by the V4L2 and ALSA sources: format negotiation against what a
/// camera offers, sequence-number drop counting, ALSA timestamp arithmetic. No C, no I/O, so it
/// is unit-tested without devices.

/// The pixel formats Reel asks a camera for (`--pixel-format`), by their V4L2 names.
public enum CameraPixelFormat: String, Sendable, CaseIterable, Codable {
    case yuyv, uyvy, nv12, yuv420, mjpeg

    /// Accepts the V4L2 names and Reel's raw names (`i420` for `yuv420`).
    public init?(name: String) {
        let n = name.lowercased()
        if n == "i420" { self = .yuv420; return }
        self.init(rawValue: n)
    }

    /// The V4L2 fourcc (`V4L2_PIX_FMT_*`).
    public var fourcc: UInt32 {
        switch self {
        case .yuyv: return fourCC("YUYV")
        case .uyvy: return fourCC("UYVY")
        case .nv12: return fourCC("NV12")
        case .yuv420: return fourCC("YU12")
        case .mjpeg: return fourCC("MJPG")
        }
    }

    /// The format by fourcc; `JPEG` (some UVC cameras) counts as MJPEG.
    public init?(fourcc: UInt32) {
        if fourcc == fourCC("JPEG") { self = .mjpeg; return }
        guard let f = Self.allCases.first(where: { $0.fourcc == fourcc }) else { return nil }
        self = f
    }

    /// The raw format the pipeline receives: MJPEG is decoded to I420 on the capture thread.
    public var delivered: PixelFormat {
        switch self {
        case .yuyv: return .yuyv
        case .uyvy: return .uyvy
        case .nv12: return .nv12
        case .yuv420, .mjpeg: return .i420
        }
    }
}

/// `"YUYV"` as a V4L2 fourcc (little-endian: first character in the low byte).
public func fourCC(_ s: String) -> UInt32 {
    var v: UInt32 = 0
    for (i, b) in s.utf8.prefix(4).enumerated() { v |= UInt32(b) << (8 * UInt32(i)) }
    return v
}

/// The four characters of a fourcc, trailing spaces trimmed (`"YUYV"`).
public func fourCCString(_ v: UInt32) -> String {
    var s = ""
    for i in 0..<4 {
        let b = UInt8((v >> (8 * UInt32(i))) & 0xff)
        s.append(b >= 0x20 && b < 0x7f ? Character(Unicode.Scalar(b)) : "?")
    }
    while s.hasSuffix(" ") { s.removeLast() }
    return s
}

/// Frame rates a camera offers at one size: a list (discrete intervals) or a range.
public enum CameraRates: Sendable, Equatable, Codable {
    case discrete([Rational])
    /// Any rate between `min` and `max` (stepwise or continuous intervals).
    case range(min: Rational, max: Rational)

    public func contains(_ r: Rational) -> Bool {
        switch self {
        case let .discrete(list): return list.contains(r)
        case let .range(lo, hi): return !(r < lo) && !(hi < r)
        }
    }
    public var text: String {
        switch self {
        case let .discrete(list): return list.map(\.description).joined(separator: ", ")
        case let .range(lo, hi): return "\(lo)-\(hi)"
        }
    }
}


/// One size a camera offers for a pixel format, with its frame rates.
public struct CameraSize: Sendable, Equatable, Codable {
    public var width: Int
    public var height: Int
    public var rates: CameraRates
    public init(width: Int, height: Int, rates: CameraRates) { self.width = width; self.height = height; self.rates = rates }
}

/// One pixel format a camera offers (from VIDIOC_ENUM_FMT), with its sizes.
public struct CameraFormat: Sendable, Equatable, Codable {
    public var fourcc: UInt32
    public var description: String
    /// Discrete sizes (VIDIOC_ENUM_FRAMESIZES).
    public var sizes: [CameraSize]
    /// A stepwise or continuous size range instead of discrete sizes; rates unknown until set.
    public var sizeRange: SizeRange?
    public struct SizeRange: Sendable, Equatable, Codable {
        public var minWidth, maxWidth, stepWidth, minHeight, maxHeight, stepHeight: Int
        public init(minWidth: Int, maxWidth: Int, stepWidth: Int, minHeight: Int, maxHeight: Int, stepHeight: Int) {
            self.minWidth = minWidth; self.maxWidth = maxWidth; self.stepWidth = max(1, stepWidth)
            self.minHeight = minHeight; self.maxHeight = maxHeight; self.stepHeight = max(1, stepHeight)
        }
        public func contains(width w: Int, height h: Int) -> Bool {
            (minWidth...maxWidth).contains(w) && (w - minWidth) % stepWidth == 0
                && (minHeight...maxHeight).contains(h) && (h - minHeight) % stepHeight == 0
        }
    }
    public init(fourcc: UInt32, description: String, sizes: [CameraSize], sizeRange: SizeRange? = nil) {
        self.fourcc = fourcc; self.description = description; self.sizes = sizes; self.sizeRange = sizeRange
    }
    /// Reel's name for it (`yuyv`), or nil when Reel cannot record it.
    public var reelName: String? { CameraPixelFormat(fourcc: fourcc)?.rawValue }
}

/// What Reel asks of a camera.
public struct CameraRequest: Sendable, Equatable, Codable {
    public var width: Int
    public var height: Int
    public var fps: Rational
    public var pixelFormat: CameraPixelFormat
    public init(width: Int, height: Int, fps: Rational, pixelFormat: CameraPixelFormat) {
        self.width = width; self.height = height; self.fps = fps; self.pixelFormat = pixelFormat
    }
    public var text: String { "\(width)x\(height) \(pixelFormat.rawValue) at \(fps) fps" }
}

/// The offer of a camera as an indented listing: each format Reel can record with one line per
/// size and its rates, then the fourccs Reel cannot record on one line.
public func describeCameraOffer(_ formats: [CameraFormat], indent: String = "  ") -> String {
    var lines: [String] = []
    for f in formats {
        guard let name = f.reelName else { continue }
        lines.append("\(indent)\(name) (\(fourCCString(f.fourcc))): \(f.description)")
        for s in f.sizes { lines.append("\(indent)  \(s.width)x\(s.height) at \(s.rates.text) fps") }
        if let r = f.sizeRange {
            lines.append("\(indent)  \(r.minWidth)x\(r.minHeight) to \(r.maxWidth)x\(r.maxHeight) in steps of \(r.stepWidth)x\(r.stepHeight)")
        }
    }
    let other = formats.filter { $0.reelName == nil }.map { fourCCString($0.fourcc) }
    if !other.isEmpty { lines.append("\(indent)not recordable by Reel: \(other.joined(separator: ", "))") }
    return lines.joined(separator: "\n")
}

/// Checks `request` against what the camera at `device` offers: an exact match of pixel format,
/// size and frame rate, or an error that says which part does not match and lists the offer.
/// A size inside a stepwise range matches with any rate (the rate is verified after setting it).
public func negotiateCamera(_ request: CameraRequest, offer formats: [CameraFormat], device: String) -> Result<Void, CaptureError> {
    func fail(_ what: String) -> Result<Void, CaptureError> {
        let offer = formats.isEmpty ? "  (no capture formats)" : describeCameraOffer(formats)
        return .failure(CaptureError("\(device) cannot capture \(request.text): \(what). The camera offers:\n\(offer)\n(choose one with --size, --fps and --pixel-format; see 'reelctl devices')"))
    }
    guard let f = formats.first(where: { CameraPixelFormat(fourcc: $0.fourcc) == request.pixelFormat }) else {
        return fail("it does not offer pixel format \(request.pixelFormat.rawValue)")
    }
    if let s = f.sizes.first(where: { $0.width == request.width && $0.height == request.height }) {
        if s.rates.contains(request.fps) { return .success(()) }
        return fail("it offers \(request.pixelFormat.rawValue) \(request.width)x\(request.height) only at \(s.rates.text) fps")
    }
    if let r = f.sizeRange, r.contains(width: request.width, height: request.height) { return .success(()) }
    return fail("it does not offer \(request.pixelFormat.rawValue) at \(request.width)x\(request.height)")
}

/// An error from a capture device, naming the device and the fix.
public struct CaptureError: Error, CustomStringConvertible, Sendable, Equatable {
    public var description: String
    public init(_ d: String) { description = d }
}

/// Frames lost between two V4L2 buffer sequence numbers, modulo 2^32 (sequence numbers wrap;
/// vivid's `wrap_sequence_number` makes them wrap after 128 frames). 0 for consecutive frames.
/// A repeated or backward number (a driver restart) counts as no loss.
public func sequenceGap(previous: UInt32, current: UInt32) -> UInt32 {
    let d = current &- previous
    return d == 0 || d > UInt32.max / 2 ? 0 : d - 1
}

/// ALSA capture time arithmetic. At `htstamp` (CLOCK_MONOTONIC ns) the device had captured
/// `delay` frames that are not yet read, so the next frame to be read was captured
/// `delay` frame periods before `htstamp`. Returns the capture time of the first of the
/// `read` frames just read when `delay` was sampled after the read.
public func alsaCaptureTime(htstamp: Nanos, delayFrames: Int64, framesJustRead: Int64, sampleRate: Int) -> Nanos {
    htstamp - rescale(delayFrames + framesJustRead, nanosPerSecond, Int64(sampleRate))
}

/// Samples lost in an overrun: the capture time of the first sample after recovery against the
/// time the next sample was due, in whole samples (never negative; jitter under half a period
/// `tolerance` counts as none).
public func alsaLostSamples(expectedTime: Nanos, actualTime: Nanos, sampleRate: Int, tolerance: Int64) -> Int64 {
    let n = rescale(actualTime - expectedTime, Int64(sampleRate), nanosPerSecond)
    return n > tolerance ? n : 0
}

/// The capture time of the first chunk read after an overrun was recovered. Recovery prepares
/// the device, which drops everything still in its buffer, and starts it again at `restartedAt`
/// (CLOCK_MONOTONIC, taken just before the restart): nothing read afterwards can have been
/// captured earlier, whatever the driver's timestamp says. snd-aloop once reported the first
/// chunk after a restart as captured where the last one before the overrun ended (a stale
/// status), which hid a 1.5 s loss: the audio after it ran 1.5 s early. A stamp up to `slack`
/// (a period) before the restart is the driver's usual granularity (snd-aloop's is 1-3 ms) and
/// is kept; an earlier one is stale, and the restart is the better bound.
public func alsaFirstCaptureTimeAfterRestart(stamped: Nanos, restartedAt: Nanos, slack: Nanos) -> Nanos {
    stamped < restartedAt - slack ? restartedAt : stamped
}
