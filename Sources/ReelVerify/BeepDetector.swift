#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// One detected 1 kHz beep; positions are fractional sample indices from the first decoded sample.
public struct Beep: Sendable {
    public var onsetSample: Double
    public var onsetEnvSample: Double
    public var onsetPhaseSample: Double?
    public var phaseOk: Bool
    public var endSample: Double
    public var amplitude: Double
    public var durationMs: Double
}

/// The oracle's `find_beeps`, streamed: samples arrive in decoder-sized pieces and only the
/// current beep region (about 100 ms) plus one averaging window is held, so an hour of audio
/// costs kilobytes, not gigabytes.
///
/// Quadrature demodulation at 1 kHz averaged over one period centred on each sample gives the
/// tone's envelope; regions above 0.1 full scale at least 2 ms long (closer than 3 ms merged)
/// are beeps; the onset is the interpolated crossing of half the plateau, refined by the tone's
/// phase over the plateau when that agrees within 0.2 ms (a beep starts at phase 0).
public final class BeepDetector {
    static let freq = 1000.0

    public let rate: Int
    let L: Int                 // averaging window: one period, round(rate / 1000) samples
    let halfL: Int             // L // 2: the window of sample i is [i - L//2, i - L//2 + L)
    let w: Double              // 2 pi 1000 / rate
    let period: Double         // rate / 1000 samples
    let gap: Int64             // int(0.003 * rate): regions closer than this merge
    let minLength: Int64       // int(0.002 * rate): shorter merged regions are ignored
    let cosTable: [Double]     // cos(w i) and sin(w i) over one exact period of i
    let sinTable: [Double]

    // x * cos and x * sin from global index xBase on (the window and any open region).
    private var xi: [Double] = []
    private var xq: [Double] = []
    private var xBase: Int64 = 0
    private(set) var total: Int64 = 0     // samples fed
    private var phaseIndex = 0            // total mod the table length

    // Envelope from global index envBase on (the open region and the sample before it).
    private var env: [Double] = []
    private var envBase: Int64 = 0
    private var nextEnv: Int64 = 0         // next index whose envelope is due
    private var sumI = 0.0, sumQ = 0.0
    private var sumLo: Int64 = 0, sumHi: Int64 = 0   // the window [sumLo, sumHi) the sums cover
    private var sinceExactSum = 0

    private enum State { case idle, inside(start: Int64), after(start: Int64, end: Int64) }
    private var state = State.idle
    public private(set) var beeps: [Beep] = []

    public init(rate: Int) {
        precondition(rate > 0)
        self.rate = rate
        L = max(1, Int((Double(rate) / Self.freq).rounded(.toNearestOrEven)))
        halfL = L / 2
        w = 2 * Double.pi * Self.freq / Double(rate)
        period = Double(rate) / Self.freq
        gap = Int64(0.003 * Double(rate))
        minLength = Int64(0.002 * Double(rate))
        // cos(w i) repeats every rate / gcd(rate, 1000) samples exactly.
        var (a, b) = (rate, 1000)
        while b != 0 { (a, b) = (b, a % b) }
        let n = rate / a
        let w = self.w
        cosTable = (0..<n).map { cos(w * Double($0)) }
        sinTable = (0..<n).map { sin(w * Double($0)) }
        xi.reserveCapacity(1 << 16); xq.reserveCapacity(1 << 16); env.reserveCapacity(1 << 14)
    }

    /// Feeds samples (channel 0, full scale 1.0 = 32768 in S16).
    public func feed(_ samples: UnsafeBufferPointer<Int16>) {
        let count = samples.count
        guard count > 0 else { return }
        let first = xi.count
        xi.append(contentsOf: repeatElement(0, count: count))
        xq.append(contentsOf: repeatElement(0, count: count))
        // Hot loop on raw buffers and locals (no per-sample exclusivity checks on the class).
        var ph = phaseIndex
        xi.withUnsafeMutableBufferPointer { pi in
            xq.withUnsafeMutableBufferPointer { pq in
                cosTable.withUnsafeBufferPointer { ct in
                    sinTable.withUnsafeBufferPointer { st in
                        let n = ct.count
                        for k in 0..<count {
                            let x = Double(samples[k]) / 32768.0
                            pi[first + k] = x * ct[ph]
                            pq[first + k] = x * st[ph]
                            ph += 1
                            if ph == n { ph = 0 }
                        }
                    }
                }
            }
        }
        phaseIndex = ph
        total += Int64(count)
        advance(final: false)
        compact()
    }

    /// The end of the stream: the last envelope values (window clipped at the end, as the
    /// oracle's moving mean is) and any beep still open.
    public func finish() -> [Beep] {
        advance(final: true)
        switch state {
        case .idle: break
        case .inside(let a): finalize(a, total, n: total)
        case .after(let a, let b): finalize(a, b, n: total)
        }
        state = .idle
        return beeps
    }

    @inline(__always) private func x(_ i: Int64) -> (Double, Double) {
        let k = Int(i - xBase)
        return (xi[k], xq[k])
    }

    private func advance(final: Bool) {
        let Ls = Int64(L), h = Int64(halfL)
        let total = self.total, xBase = self.xBase
        // 1. The envelope of every index whose window is complete, into `batch` (locals only).
        var batch: [Double] = []
        var i = nextEnv
        var (sI, sQ, lo0, hi0, since) = (sumI, sumQ, sumLo, sumHi, sinceExactSum)
        let invL = 1.0 / Double(L)
        xi.withUnsafeBufferPointer { pi in
            xq.withUnsafeBufferPointer { pq in
                batch.reserveCapacity(Int(max(0, total - i)))
                while i < total {
                    // Centred moving mean over L samples, window [i - L//2, +L) clipped to the
                    // stream: numpy's clip puts it at [0, L) near the start and cuts it at the end.
                    let lo = max(0, i - h)
                    var hi = lo + Ls
                    if hi > total {
                        if !final { break }
                        hi = total
                    }
                    if since >= 4096 || lo0 > lo || lo >= hi0 {
                        // exact sum now and then, so rounding in the running sum cannot build up
                        sI = 0; sQ = 0
                        for k in Int(lo - xBase)..<Int(hi - xBase) { sI += pi[k]; sQ += pq[k] }
                        lo0 = lo; hi0 = hi; since = 0
                    } else {
                        while hi0 < hi { let k = Int(hi0 - xBase); sI += pi[k]; sQ += pq[k]; hi0 += 1 }
                        while lo0 < lo { let k = Int(lo0 - xBase); sI -= pi[k]; sQ -= pq[k]; lo0 += 1 }
                        since += 1
                    }
                    let mi = sI * invL, mq = sQ * invL
                    batch.append(2 * (mi * mi + mq * mq).squareRoot())
                    i += 1
                }
            }
        }
        (sumI, sumQ, sumLo, sumHi, sinceExactSum) = (sI, sQ, lo0, hi0, since)
        guard !batch.isEmpty else { return }
        // 2. The region state machine over the batch (env first: finalize reads it).
        let from = nextEnv
        env.append(contentsOf: batch)
        nextEnv = i
        var k = 0
        while k < batch.count {
            if case .idle = state {
                // fast path: nothing open, skip to the next sample above the threshold
                while k < batch.count && !(batch[k] > 0.1) { k += 1 }
                if k == batch.count { break }
            }
            step(from + Int64(k), above: batch[k] > 0.1)
            k += 1
        }
    }

    /// The region state machine on one more envelope sample.
    @inline(__always) private func step(_ i: Int64, above: Bool) {
        switch state {
        case .idle:
            if above { state = .inside(start: i) }
        case .inside(let a):
            if !above { state = .after(start: a, end: i) }
        case .after(let a, let b):
            if above {
                if i - b < gap { state = .inside(start: a) }   // merge with the previous region
                else { finalize(a, b, n: nil); state = .inside(start: i) }
            } else if i - b + 1 >= gap {
                // no region can start closer than `gap` after b any more
                finalize(a, b, n: nil)
                state = .idle
            }
        }
    }

    @inline(__always) private func e(_ i: Int64) -> Double { env[Int(i - envBase)] }

    /// One merged region [a, b) to a beep, as the oracle measures it. `n` is the stream length
    /// when known (at the end); mid-stream the sample after b is always present.
    private func finalize(_ a: Int64, _ b: Int64, n: Int64?) {
        guard b - a >= minLength else { return }
        let inner: [Double]
        if b - a > 8 {
            let q = (b - a) / 4
            inner = (a + q ..< b - q).map { e($0) }
        } else {
            inner = (a..<b).map { e($0) }
        }
        let plateau = median(inner)
        let half = plateau / 2
        var i = a
        while i < b && !(e(i) >= half) { i += 1 }
        if i == b { i = a }                               // numpy argmax of all-false is 0
        let onsetEnv: Double = i == 0 ? 0 : Double(i - 1) + (half - e(i - 1)) / (e(i) - e(i - 1))
        var j = b - 1
        while j > a && !(e(j) >= half) { j -= 1 }
        let end: Double
        if j + 1 < (n ?? Int64.max), e(j) != e(j + 1) {
            end = Double(j) + (e(j) - half) / (e(j) - e(j + 1))
        } else {
            end = Double(j + 1)
        }
        let p0 = Int64((onsetEnv + Double(L)).rounded(.towardZero))
        let p1 = Int64((end - Double(L)).rounded(.towardZero))
        var onsetPhase: Double? = nil
        var phaseOk = false
        if p1 - p0 > 2 * Int64(L) {
            var si = 0.0, sq = 0.0
            for k in p0..<p1 { let (u, v) = x(k); si += u; sq += v }
            let mi = si / Double(p1 - p0), mq = sq / Double(p1 - p0)
            // x = A sin(w (t - s)): mean(x cos) = -A/2 sin(ws), mean(x sin) = A/2 cos(ws)
            var ws = atan2(-mi, mq)
            if ws < 0 { ws += 2 * Double.pi }
            let s0 = ws / w
            let k = ((onsetEnv - s0) / period).rounded(.toNearestOrEven)
            let op = s0 + k * period
            onsetPhase = op
            phaseOk = abs(op - onsetEnv) < 0.0002 * Double(rate)
        }
        let onset = phaseOk ? onsetPhase! : onsetEnv
        beeps.append(Beep(onsetSample: onset, onsetEnvSample: onsetEnv, onsetPhaseSample: onsetPhase,
                          phaseOk: phaseOk, endSample: end, amplitude: plateau,
                          durationMs: (end - onset) * 1000 / Double(rate)))
    }

    private func median(_ v: [Double]) -> Double {
        guard !v.isEmpty else { return 0 }
        let s = v.sorted()
        let m = s.count / 2
        return s.count % 2 == 1 ? s[m] : (s[m - 1] + s[m]) / 2
    }

    /// Drops what no future envelope or region can need.
    private func compact() {
        var keepEnv = nextEnv - 1                         // env[i - 1] for an onset at i
        var keepX = max(0, nextEnv - Int64(halfL))       // the next window's start
        keepX = min(keepX, sumLo)
        switch state {
        case .idle: break
        case .inside(let a), .after(let a, _):
            keepEnv = min(keepEnv, a - 1)
            keepX = min(keepX, a)
        }
        keepEnv = max(keepEnv, envBase)
        keepX = max(keepX, xBase)
        let dropEnv = Int(keepEnv - envBase), dropX = Int(keepX - xBase)
        if dropEnv >= 1 << 15 { env.removeFirst(dropEnv); envBase = keepEnv }
        if dropX >= 1 << 16 {
            xi.removeFirst(dropX); xq.removeFirst(dropX); xBase = keepX
        }
    }
}
