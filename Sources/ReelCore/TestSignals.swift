/// The synthetic sync sources, exactly as shared/test-sources.md defines them: a field tool for
/// checking a capture box's A/V sync and the ground truth of Reel's own end-to-end tests.

/// Video: timecode strip (source ms, 32 bits, MSB leftmost) in the top H/8 rows, a full white
/// flash below the strip on the first frame of each whole second k >= 1, and otherwise a
/// diagonal pattern that moves every frame with mean luma at most 110.
public struct TestVideoPattern: Sendable {
    public let format: VideoFormat
    public static let white: UInt8 = 235, black: UInt8 = 16, neutral: UInt8 = 128
    static let period = 64  // pattern period in pixels (even, so packed 4:2:2 stays aligned)

    /// One row of the moving pattern, `period` pixels longer than the frame so that any even
    /// shift can be copied with one memcpy per row. Packed formats hold the packed bytes; planar
    /// formats hold luma (and `chromaRow` holds interleaved or planar chroma values).
    private let lumaRow: [UInt8]
    private let uRow: [UInt8]
    private let vRow: [UInt8]

    public init(format: VideoFormat) {
        precondition(format.width % 2 == 0 && format.height % 2 == 0, "test pattern needs even width and height")
        self.format = format
        let w = format.width + Self.period
        lumaRow = (0..<w).map { UInt8(16 + (($0 % Self.period) * 3) / 2) }         // 16...110, mean 63
        uRow = (0..<w / 2).map { UInt8(96 + ($0 % (Self.period / 2)) * 2) }
        vRow = (0..<w / 2).map { UInt8(160 - ($0 % (Self.period / 2)) * 2) }
    }

    /// floor(t_n * 1000) as an unsigned 32-bit value, t_n = n / fps exactly.
    public func timecodeMs(frame n: Int64) -> UInt32 {
        UInt32(truncatingIfNeeded: rescale(n, 1000 * format.fps.den, format.fps.num, rounding: .down))
    }

    /// Source second of frame n: floor(n / fps).
    public func second(frame n: Int64) -> Int64 { rescale(n, format.fps.den, format.fps.num, rounding: .down) }

    public func isFlash(frame n: Int64) -> Bool { n > 0 && second(frame: n) > second(frame: n - 1) }

    public var stripRows: Int { format.height / 8 }
    public var cellWidth: Int { format.width / 32 }

    /// Luma of column x inside the strip for timecode `ms`.
    @inline(__always) func stripLuma(x: Int, ms: UInt32) -> UInt8 {
        let cell = x / cellWidth
        guard cell < 32 else { return Self.black }
        return (ms >> UInt32(31 - cell)) & 1 == 1 ? Self.white : Self.black
    }

    /// Renders frame n into `dst` (exactly `format.pixelFormat.frameBytes` bytes, tightly packed).
    public func render(frame n: Int64, into dst: UnsafeMutableRawBufferPointer) {
        let w = format.width, h = format.height
        precondition(dst.count >= format.pixelFormat.frameBytes(width: w, height: h))
        let ms = timecodeMs(frame: n)
        let flash = isFlash(frame: n)
        let base = dst.baseAddress!.assumingMemoryBound(to: UInt8.self)
        // The moving part: each row is the pattern shifted by an even number of pixels that
        // depends on the row and the frame (diagonal stripes sliding right every frame).
        func shift(_ y: Int) -> Int { ((y + 4 * Int(n % Int64(Self.period))) * 2) % Self.period }
        switch format.pixelFormat {
        case .yuyv, .uyvy:
            let yFirst = format.pixelFormat == .yuyv
            let (yo, co) = yFirst ? (0, 1) : (1, 0)  // luma and chroma byte offsets within a pair
            for y in 0..<h {
                let row = base + y * w * 2
                if y < stripRows || flash {
                    for x in 0..<w {
                        row[x * 2 + yo] = y < stripRows ? stripLuma(x: x, ms: ms) : Self.white
                        row[x * 2 + co] = Self.neutral
                    }
                } else {
                    let s = shift(y)
                    for x in 0..<w {
                        row[x * 2 + yo] = lumaRow[x + s]
                        row[x * 2 + co] = (x & 1 == 0) ? uRow[(x + s) / 2] : vRow[(x + s) / 2]
                    }
                }
            }
        case .i420, .nv12, .i422:
            for y in 0..<h {
                let row = base + y * w
                if y < stripRows { for x in 0..<w { row[x] = stripLuma(x: x, ms: ms) } }
                else if flash { (row).update(repeating: Self.white, count: w) }
                else { lumaRow.withUnsafeBufferPointer { row.update(from: $0.baseAddress! + shift(y), count: w) } }
            }
            // 4:2:0 has one chroma row per two luma rows; planar 4:2:2 one per luma row.
            let vsub = format.pixelFormat == .i422 ? 1 : 2
            let cw = w / 2, ch = h / vsub
            let chroma = base + w * h
            for cy in 0..<ch {
                let neutral = cy * vsub < stripRows || flash
                let s = shift(cy * vsub) / 2
                for cx in 0..<cw {
                    let u = neutral ? Self.neutral : uRow[cx + s]
                    let v = neutral ? Self.neutral : vRow[cx + s]
                    if format.pixelFormat != .nv12 {
                        chroma[cy * cw + cx] = u
                        chroma[cw * ch + cy * cw + cx] = v
                    } else {
                        chroma[(cy * cw + cx) * 2] = u
                        chroma[(cy * cw + cx) * 2 + 1] = v
                    }
                }
            }
        }
    }
}

/// Audio: a 100 ms 1 kHz beep of amplitude 0.5 at b_k = round(k * rate * (1 + P/1e6)) for every
/// whole second k >= 1, silence elsewhere; S16 interleaved, the same on every channel. With skew
/// P ppm the sample clock runs at rate * (1 + P/1e6) on CLOCK_MONOTONIC.
public struct TestAudioSignal: Sendable {
    public let format: AudioFormat
    public let skewPpm: Int64
    private let beep: [Int16]

    public init(format: AudioFormat, skewPpm: Int64 = 0) {
        precondition(skewPpm > -1_000_000, "skew must be above -1e6 ppm")
        self.format = format
        self.skewPpm = skewPpm
        let rate = format.sampleRate
        beep = (0..<(rate / 10)).map { j in
            // Amplitude, not time: floating point is fine here.
            let x = 0.5 * _sin(2.0 * Double.pi * 1000.0 * Double(j) / Double(rate))
            return Int16((x * 32767.0).rounded())
        }
    }

    /// First sample of beep k.
    public func beepStart(_ k: Int64) -> Int64 {
        rescale(k * Int64(format.sampleRate), 1_000_000 + skewPpm, 1_000_000)
    }

    /// Capture instant of sample m relative to T0: m / (rate * (1 + P/1e6)) in ns.
    public func captureTime(sample m: Int64) -> Nanos {
        rescale(m, nanosPerSecond * 1_000_000, Int64(format.sampleRate) * (1_000_000 + skewPpm))
    }

    /// First sample of 10 ms chunk i (chunks tile the stream even when rate is not a multiple of 100).
    public func chunkStart(_ i: Int64) -> Int64 { i * Int64(format.sampleRate) / 100 }

    /// Writes samples [m, m + frames) into `dst` (frames * channels Int16 values).
    public func render(from m: Int64, frames: Int, into dst: UnsafeMutablePointer<Int16>) {
        let ch = format.channels
        var k = max(1, rescale(m, 1_000_000, Int64(format.sampleRate) * (1_000_000 + skewPpm), rounding: .down))
        if k > 1 { k -= 1 }
        var i = 0
        var cur = m
        let end = m + Int64(frames)
        while cur < end {
            while beepStart(k + 1) <= cur { k += 1 }
            let b = beepStart(k)
            let value: Int16
            if cur >= b && cur - b < Int64(beep.count) { value = beep[Int(cur - b)] } else { value = 0 }
            for c in 0..<ch { dst[i * ch + c] = value }
            i += 1; cur += 1
        }
    }
}

// Foundation-free sine for the one-time beep table.
@inline(__always) func _sin(_ x: Double) -> Double {
    #if canImport(Glibc)
    return Glibc.sin(x)
    #else
    return Darwin.sin(x)
    #endif
}
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
