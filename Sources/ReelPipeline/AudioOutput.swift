import ReelCore
import ReelMedia

/// The encoder as `AudioOutput` drives it: `AACEncoder`, or in tests a fake that records the PCM
/// it is given.
package protocol AudioEncoding: AnyObject {
    /// Samples (per channel) in one packet.
    var frameSize: Int { get }
    func encode(interleaved: UnsafeBufferPointer<Int16>, _ emit: (Packet) throws -> Void) throws
    func flush(_ emit: (Packet) throws -> Void) throws
}

extension AACEncoder: AudioEncoding {}

/// What the recording keeps of its audio, from the pipeline's decided runs to AAC packets in the
/// file: the AAC thread's one object (`AudioEncoderThread` hands it every `AudioItem`, in order;
/// nothing else touches it). It owns the encoder, the file-time offset of its packets, the
/// history an undo re-primes a fresh encoder with, and the crossfade at every join.
///
/// Rules:
/// - Output positions are exactly the pipeline's: every kept frame and every frame of silence is
///   one output frame, in order; nothing is added or removed (the file's audio length, every
///   timestamp and every cut instant are the timeline's).
/// - Delay line: the last `half` output frames (`JoinCrossfade.half`, 2.5 ms) are held back from
///   the encoder, so that a cut can still reach them. `finish` lets them out.
/// - A join is a kept frame that follows dropped ones after some output (a resume after a pause,
///   the next take after an undo). The `JoinCrossfade` window is centred on it: the outgoing side
///   is the held tail plus the `half` source frames that followed its cut (the first dropped
///   ones, and kept ones when the pause was shorter than that), the incoming side the `half`
///   source frames before the resume (a ring of the last source frames, dropped or kept) plus
///   its first `half` kept frames. When those have come, the mixed window replaces the held
///   tail and the incoming frames. A take shorter than `half` frames, or the end, completes the
///   mix with what has come. A cut before any output (the recording's start) is no join.
/// - A device gap (`.gap`: silence filled in for samples the device lost, kept in place) has no
///   far side to mix: the held tail fades out to it and the first `half` source frames after it
///   fade in, along a raised cosine (flat where it meets the silence). Nothing moves; a pause during the gap is
///   an ordinary cut.
/// - Undo (`rollBack`): each take records, when it begins, what the encoder had been given
///   (its last two packets' worth: the history) and, when its join is mixed, the outgoing side
///   unmixed. An undo of take N > 1 gets a fresh encoder, fed the history from one packet
///   before `resume` (the first packet the file lost) to where take N began to change the
///   output, so the packet there overlaps its kept neighbour whole; then the outgoing side of
///   take N's join is restored as if take N had never come, and the next take's join mixes it
///   anew. The file must have cut back far enough: its take boundary leads the join by `half`
///   and one packet (`MP4Writer`'s `audioLead`), so no packet kept in the file was transformed
///   from a sample the undone take's mix changed. Take 1: everything starts again.
/// - Packets from the encoder are written in file time: their time plus `offset`, and those
///   before `keepFrom` (a re-primed encoder's context) are dropped.
/// - No allocation per join or per chunk: the windows, the rings and each take's record are
///   allocated up front (the take records grow by doubling past 64 takes).
final class AudioOutput {
    let channels: Int
    let fade: JoinCrossfade
    private var half: Int { fade.half }
    private let makeEncoder: () throws -> any AudioEncoding
    private let write: (Packet) throws -> Void
    private(set) var encoder: any AudioEncoding
    /// File time of the encoder's packet time 0, and the first packet time written.
    private var offset: Int64 = 0
    private var keepFrom: Int64 = .min
    /// The last samples given to the encoder: what an undo re-primes a fresh one with.
    private var history: AudioHistory
    private let historyFrames: Int

    /// Output frames produced (kept and silence) and given to the encoder.
    private(set) var produced: Int64 = 0
    private(set) var submitted: Int64 = 0

    private enum State { case running, cut, joining }
    private var state = State.running
    /// The delay line: the last `heldCount` output frames (at most `half`), not yet encoded.
    private var held: [Int16]
    private var heldCount = 0
    /// The join window, 2 × half frames: the outgoing side (`outWin`, its first `outStart`
    /// frames absent when less than `half` had been output), the incoming side (`inWin`), the mix.
    private var outWin: [Int16], inWin: [Int16], mixWin: [Int16]
    private var outStart = 0
    /// Frames of the outgoing side's continuation past its cut collected (up to `half`).
    private var post = 0
    /// Incoming frames collected (up to `half`).
    private var inCount = 0
    /// The last `half` source frames (kept or dropped), a ring: the incoming side before a resume.
    private var pre: [Int16]
    private var preNext = 0, preCount = 0
    /// In a device gap (the tail has faded out), and the frames of the fade-in still to come after it.
    private var inGap = false
    private var fadeInLeft = 0
    /// The fade-in's frames, faded (half a window).
    private var faded: [Int16]
    private let zeros: [Int16]

    /// Per take (by number): what `rollBack` restores.
    private struct TakeRecord {
        var start: Int64 = 0
        var submitted: Int64 = 0
        /// Frames of `context` filled (the history at the take's start, oldest first).
        var contextFrames = 0
        /// The take began with a join pending (else it continued the output without a cut).
        var joined = false
        var held = 0
        /// The outgoing side (`window`) is the final one: the join was mixed.
        var windowSaved = false
    }
    private var takes: [TakeRecord]
    /// Each take's context (`historyFrames` frames) and outgoing window (2 × half frames), flat.
    private var contexts: [Int16], windows: [Int16]

    /// - Parameters:
    ///   - encoder: the first encoder; `makeEncoder` makes the fresh ones an undo needs (same settings).
    ///   - write: a packet to the file, in file time.
    init(channels: Int, sampleRate: Int, encoder: any AudioEncoding, makeEncoder: @escaping () throws -> any AudioEncoding,
         write: @escaping (Packet) throws -> Void) {
        self.channels = channels
        fade = JoinCrossfade(sampleRate: sampleRate, channels: channels)
        self.makeEncoder = makeEncoder
        self.write = write
        self.encoder = encoder
        // An undo re-encodes from one packet before the first packet the file lost, which leads
        // the join's first changed sample by up to two packets (`MP4Writer.audioLead`): at most
        // three packets of context.
        historyFrames = 3 * encoder.frameSize
        history = AudioHistory(channels: channels, frames: historyFrames)
        let w = fade.frames * channels
        held = [Int16](repeating: 0, count: fade.half * channels)
        outWin = [Int16](repeating: 0, count: w)
        inWin = outWin; mixWin = outWin
        pre = held
        faded = held
        zeros = [Int16](repeating: 0, count: 1024 * channels)
        takes = []
        takes.reserveCapacity(64)
        contexts = []; contexts.reserveCapacity(64 * historyFrames * channels)
        windows = []; windows.reserveCapacity(64 * w)
    }

    /// Frames the delay line and an open join hold back from the encoder.
    var pending: Int64 { produced - submitted }

    // MARK: The stream

    func consume(_ item: AudioItem) throws {
        switch item {
        case let .keep(s): try keep(s)
        case let .drop(s): try drop(s)
        case let .gap(s): try gap(s)
        case let .silence(n):
            var left = n
            while left > 0 {
                let k = min(left, 1024)
                try zeros.withUnsafeBufferPointer { try keep(UnsafeBufferPointer(rebasing: $0[0..<(k * channels)])) }
                left -= k
            }
        case let .command(c):
            switch c {
            case let .beginTake(number, start): beginTake(number, start: start)
            case let .rollBack(take, resume, to): try rollBack(take: take, resume: resume, to: to)
            case .finish: try finish()
            case .discard: try? encoder.flush { _ in }
            }
        }
    }

    /// Kept frames (or silence the output needs, which counts as source frames of zeros).
    private func keep(_ s: UnsafeBufferPointer<Int16>) throws {
        guard !s.isEmpty else { return }
        var rest = s
        if state == .cut { startJoin() }
        if state == .joining {
            let n = rest.count / channels
            let k = min(half - inCount, n)
            copy(rest, frames: k, into: &inWin, at: half + inCount)
            // The outgoing side's source goes on into these frames when its pause was shorter than half.
            let c = min(half - post, k)
            if c > 0 { copy(rest, frames: c, into: &outWin, at: half + post); post += c }
            inCount += k
            produced += Int64(k)
            notePre(UnsafeBufferPointer(rebasing: rest[0..<(k * channels)]))
            rest = UnsafeBufferPointer(rebasing: rest[(k * channels)...])
            if inCount == half { try completeJoin() } else { return }
        }
        guard !rest.isEmpty else { return }
        produced += Int64(rest.count / channels)
        notePre(rest)
        if inGap { inGap = false; fadeInLeft = half }
        if fadeInLeft > 0 {
            // The first source frames after a device gap rise from silence.
            let n = rest.count / channels, k = min(fadeInLeft, n), first = half - fadeInLeft
            faded.withUnsafeMutableBufferPointer { f in
                for i in 0..<k {
                    let g = Self.toSilence(fade.incomingGain(min(fade.frames - 1, 2 * (first + i))))
                    for c in 0..<channels { f[i * channels + c] = Self.scaled(rest[i * channels + c], g) }
                }
            }
            fadeInLeft -= k
            try faded.withUnsafeBufferPointer { try push(UnsafeBufferPointer(rebasing: $0[0..<(k * channels)])) }
            rest = UnsafeBufferPointer(rebasing: rest[(k * channels)...])
            guard !rest.isEmpty else { return }
        }
        try push(rest)
    }

    /// Silence filled in for lost samples: kept as it is; the tail before it fades out (once).
    private func gap(_ s: UnsafeBufferPointer<Int16>) throws {
        guard !s.isEmpty else { return }
        guard state == .running else { return try keep(s) }  // inside a join: mixed as any frames
        if !inGap {
            inGap = true
            fadeInLeft = 0
            let h = heldCount
            held.withUnsafeMutableBufferPointer { b in
                for p in 0..<h {
                    let g = Self.toSilence(fade.outgoingGain(min(fade.frames - 1, ((2 * p + 1) * fade.frames) / (2 * h))))
                    for c in 0..<channels { b[p * channels + c] = Self.scaled(b[p * channels + c], g) }
                }
            }
        }
        produced += Int64(s.count / channels)
        try push(s)
        notePre(s)
    }

    /// The gain of a fade to or from silence at the crossfade's point with gain `g` (Q15): its
    /// square, a raised cosine, whose slope is zero where it meets the silence (an equal-power
    /// gain starts with a kink there: a 347 Hz tone faded in that way made 3.4 times its second
    /// difference, this stays within 3 times: AudioOutputTests).
    private static func toSilence(_ g: Int32) -> Int64 { (Int64(g) * Int64(g) + (1 << 14)) >> 15 }

    /// A sample times a Q15 gain, rounded and saturated.
    private static func scaled(_ x: Int16, _ g: Int64) -> Int16 { Int16(clamping: (Int64(x) * g + (1 << 14)) >> 15) }

    private func drop(_ s: UnsafeBufferPointer<Int16>) throws {
        guard !s.isEmpty else { return }
        inGap = false; fadeInLeft = 0  // a cut: its join mixes whatever the gap left
        if state == .joining { try completeJoin() }  // a take shorter than half a window
        if state == .running, heldCount > 0 {
            // A cut after output: the held tail is the outgoing side, the dropped frames its continuation.
            outStart = half - heldCount
            outWin.withUnsafeMutableBufferPointer { w in
                for i in 0..<(outStart * channels) { w[i] = 0 }
                held.withUnsafeBufferPointer { h in
                    for i in 0..<(heldCount * channels) { w[outStart * channels + i] = h[i] }
                }
            }
            heldCount = 0
            post = 0
            state = .cut
        }
        if state == .cut, post < half {
            let c = min(half - post, s.count / channels)
            copy(s, frames: c, into: &outWin, at: half + post)
            post += c
        }
        notePre(s)
    }

    /// The first kept frame after a cut: the incoming side begins with the source frames before it.
    private func startJoin() {
        inWin.withUnsafeMutableBufferPointer { w in
            pre.withUnsafeBufferPointer { p in
                let missing = half - preCount
                for i in 0..<(missing * channels) { w[i] = 0 }
                for f in 0..<preCount {
                    let slot = (preNext - preCount + f + half) % half
                    for c in 0..<channels { w[(missing + f) * channels + c] = p[slot * channels + c] }
                }
            }
        }
        inCount = 0
        state = .joining
    }

    /// Mixes the window with what has come (all of it but at a short take or the end) and puts
    /// the mixed output frames back on the delay line.
    private func completeJoin() throws {
        if post < half { clear(&outWin, from: half + post, to: fade.frames) }
        if inCount < half { clear(&inWin, from: half + inCount, to: fade.frames) }
        // The outgoing side as it was: an undo of the take that begins here restores it.
        if let t = takes.indices.last, takes[t].joined, !takes[t].windowSaved {
            let w = fade.frames * channels
            windows.withUnsafeMutableBufferPointer { dst in
                outWin.withUnsafeBufferPointer { src in
                    for i in 0..<w { dst[t * w + i] = src[i] }
                }
            }
            takes[t].windowSaved = true
        }
        outWin.withUnsafeBufferPointer { o in
            inWin.withUnsafeBufferPointer { i in
                mixWin.withUnsafeMutableBufferPointer { m in fade.mix(outgoing: o, incoming: i, into: m) }
            }
        }
        state = .running
        // Output frames of the window: [outStart, half + inCount); the last `half` of them stay held.
        let first = outStart, end = half + inCount
        let keepFrom = max(first, end - half)
        if keepFrom > first {
            try mixWin.withUnsafeBufferPointer { try submit(UnsafeBufferPointer(rebasing: $0[(first * channels)..<(keepFrom * channels)])) }
        }
        heldCount = end - keepFrom
        held.withUnsafeMutableBufferPointer { h in
            mixWin.withUnsafeBufferPointer { m in
                for i in 0..<(heldCount * channels) { h[i] = m[keepFrom * channels + i] }
            }
        }
    }

    /// Output frames through the delay line: what falls out of it goes to the encoder.
    private func push(_ s: UnsafeBufferPointer<Int16>) throws {
        let n = s.count / channels
        let total = heldCount + n
        let out = max(0, total - half)
        let fromHeld = min(heldCount, out), fromNew = out - fromHeld
        if fromHeld > 0 {
            try held.withUnsafeBufferPointer { try submit(UnsafeBufferPointer(rebasing: $0[0..<(fromHeld * channels)])) }
        }
        if fromNew > 0 { try submit(UnsafeBufferPointer(rebasing: s[0..<(fromNew * channels)])) }
        held.withUnsafeMutableBufferPointer { h in
            let keepOld = heldCount - fromHeld
            for i in 0..<(keepOld * channels) { h[i] = h[fromHeld * channels + i] }
            for i in 0..<((n - fromNew) * channels) { h[keepOld * channels + i] = s[fromNew * channels + i] }
        }
        heldCount = total - out
    }

    /// Source frames, kept or dropped, into the ring of the last `half`.
    private func notePre(_ s: UnsafeBufferPointer<Int16>) {
        let n = s.count / channels
        guard half > 0 else { return }
        let from = max(0, n - half)
        pre.withUnsafeMutableBufferPointer { p in
            for f in from..<n {
                for c in 0..<channels { p[preNext * channels + c] = s[f * channels + c] }
                preNext = (preNext + 1) % half
            }
        }
        preCount = min(half, preCount + n)
    }

    /// Samples to the encoder (and the history), their packets to the file.
    private func submit(_ s: UnsafeBufferPointer<Int16>) throws {
        history.append(s)
        submitted += Int64(s.count / channels)
        try encoder.encode(interleaved: s, emit)
    }

    private func emit(_ p: Packet) throws {
        guard p.pts + offset >= keepFrom else { return }
        try write(Packet(data: p.data, pts: p.pts + offset, dts: p.dts + offset, duration: p.duration, isKeyframe: p.isKeyframe))
    }

    /// The end: an open join is mixed with what came, the delay line goes out, the encoder drains.
    private func finish() throws {
        switch state {
        case .joining: try completeJoin()
        case .cut:
            // Stopped while paused: the tail goes out as it was, unmixed.
            try outWin.withUnsafeBufferPointer { try submit(UnsafeBufferPointer(rebasing: $0[(outStart * channels)..<(half * channels)])) }
            state = .running
        case .running: break
        }
        if heldCount > 0 {
            try held.withUnsafeBufferPointer { try submit(UnsafeBufferPointer(rebasing: $0[0..<(heldCount * channels)])) }
            heldCount = 0
        }
        try encoder.flush(emit)
    }

    // MARK: Takes and undo

    private func beginTake(_ number: Int, start: Int64) {
        guard number >= 1 else { return }
        let w = fade.frames * channels, c = historyFrames * channels
        // Records for takes 1...number (an undone take's number comes again: its record is reused).
        if takes.count > number { takes.removeLast(takes.count - number) }
        while takes.count < number {
            takes.append(TakeRecord())
            contexts.append(contentsOf: repeatElement(0, count: c))
            windows.append(contentsOf: repeatElement(0, count: w))
        }
        let t = number - 1
        var r = TakeRecord(start: start, submitted: submitted)
        r.contextFrames = history.copyLast(into: &contexts, at: t * c)
        r.joined = state == .cut
        if !r.joined {
            // No cut before it: what the delay line holds is the outgoing side an undo restores.
            r.held = heldCount
            windows.withUnsafeMutableBufferPointer { dst in
                held.withUnsafeBufferPointer { h in for i in 0..<(heldCount * channels) { dst[t * w + i] = h[i] } }
            }
        } else {
            r.held = half - outStart
        }
        takes[t] = r
    }

    private func rollBack(take n: Int, resume: Int64?, to: Int64) throws {
        if n == 1 { return try restart() }
        guard n <= takes.count else { return }  // nothing of it reached this side: nothing to restore
        let r = takes[n - 1]
        let w = fade.frames * channels, c = historyFrames * channels
        if let resume {
            // A fresh encoder from one packet before the first packet the file lost, fed what the
            // old one had been given from there to the take's start.
            let fresh = try makeEncoder()
            let base = resume - Int64(fresh.frameSize)
            let need = Int(max(0, r.submitted - base))
            try? encoder.flush { _ in }
            encoder = fresh
            offset = base
            keepFrom = resume
            history.clear()
            submitted = r.submitted - Int64(need)
            var left = need
            // Frames older than the context the take kept are silence (they precede the recording).
            while left > r.contextFrames {
                let k = min(left - r.contextFrames, 1024)
                try zeros.withUnsafeBufferPointer { try submit(UnsafeBufferPointer(rebasing: $0[0..<(k * channels)])) }
                left -= k
            }
            if left > 0 {
                let from = (n - 1) * c + (r.contextFrames - left) * channels
                try contexts.withUnsafeBufferPointer { try submit(UnsafeBufferPointer(rebasing: $0[from..<(from + left * channels)])) }
            }
        }
        submitted = r.submitted
        produced = to
        if r.joined {
            // The outgoing side as before the take came: its join is mixed anew with the next take.
            if r.windowSaved {
                outWin.withUnsafeMutableBufferPointer { dst in
                    windows.withUnsafeBufferPointer { src in for i in 0..<w { dst[i] = src[(n - 1) * w + i] } }
                }
                post = half
            }  // else its join was never mixed: `outWin` still holds it
            outStart = half - r.held
            heldCount = 0
            state = .cut
        } else {
            held.withUnsafeMutableBufferPointer { h in
                windows.withUnsafeBufferPointer { src in for i in 0..<(r.held * channels) { h[i] = src[(n - 1) * w + i] } }
            }
            heldCount = r.held
            state = .running
        }
        takes.removeLast(takes.count - (n - 1))
    }

    /// Every take undone: the output starts again at sample 0 with a fresh encoder.
    private func restart() throws {
        try? encoder.flush { _ in }
        encoder = try makeEncoder()
        offset = 0; keepFrom = .min
        history.clear()
        produced = 0; submitted = 0
        heldCount = 0; state = .running
        takes.removeAll(keepingCapacity: true)
    }

    // MARK: Buffers

    private func copy(_ s: UnsafeBufferPointer<Int16>, frames: Int, into dst: inout [Int16], at frame: Int) {
        guard frames > 0 else { return }
        dst.withUnsafeMutableBufferPointer { d in
            for i in 0..<(frames * channels) { d[frame * channels + i] = s[i] }
        }
    }

    private func clear(_ dst: inout [Int16], from: Int, to: Int) {
        dst.withUnsafeMutableBufferPointer { d in for i in (from * channels)..<(to * channels) { d[i] = 0 } }
    }
}
