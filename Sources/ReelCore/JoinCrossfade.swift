/// The sound of a join: an equal-power crossfade between the take that ends and the take that
/// begins, so that a cut (pause then resume, an undo then the next take, a resume after a device
/// gap) makes no click.
///
/// Rules (issue 23):
/// - Nothing moves in time. The output keeps every sample position it has without a crossfade:
///   the `frames` output samples centred on the join instant J (`frames / 2` before it, as many
///   after) are replaced by a mix; no sample is added or removed, so a flash and its beep stay
///   together and the cut instants are unchanged.
/// - The mix needs a little audio on the far side of the cut: the outgoing take continued for
///   `frames / 2` samples past its cut (captured just after the pause instant, or just after a
///   kept take's end when an undo rejoins it), and the incoming take's `frames / 2` samples
///   before its cut (captured just before the resume instant). The caller holds them in a
///   preallocated ring; this type owns one table and allocates nothing per join.
/// - Equal power: the outgoing gain is cos θ and the incoming sin θ, θ rising from 0 to π/2
///   across the window, so cos² + sin² = 1 at every sample. Uncorrelated sound (speech, music,
///   room tone, noise) keeps its level through the join: no dip, no bump. Two takes of one steady
///   tone that meet in opposite phase cancel briefly in the middle, as any crossfade of them must,
///   but smoothly: the step a hard cut makes becomes a change of amplitude over the window.
/// - Length: `lengthMs` (5 ms) rounded to an even number of samples. Long enough that the
///   window's own modulation stays below a tone's curvature (a 347 Hz tone's second difference
///   across the join stays within a few times its level elsewhere, issue 23's criterion is 3×),
///   and short enough that no word, beat or flash's beep is smeared: 5 ms is a tenth of a
///   syllable, and a beep that starts on a take's first frame still reaches full level within
///   2.5 ms of it.
/// - Integer arithmetic on the samples: Q15 gains, rounded, saturated to Int16.
public struct JoinCrossfade: Sendable {
    /// The window's length in milliseconds (rounded to an even number of samples).
    public static let lengthMs = 5

    /// Samples (per channel) in the window, even: `half` before the join and `half` after it.
    public let frames: Int
    public var half: Int { frames / 2 }
    public let channels: Int
    /// Q15 gains of the incoming take, one per window position; the outgoing one is the mirror
    /// image (`gainIn[frames - 1 - i]`), since cos θ = sin(π/2 − θ) and the positions are
    /// placed symmetrically (θ_i = π/2 · (i + ½) / frames).
    private let gainIn: [Int32]

    public init(sampleRate: Int, channels: Int, lengthMs: Int = Self.lengthMs) {
        precondition(sampleRate > 0 && channels > 0 && lengthMs > 0)
        var n = (sampleRate * lengthMs + 500) / 1000
        if n % 2 == 1 { n += 1 }
        frames = max(2, n)
        self.channels = channels
        let count = frames
        gainIn = (0..<count).map { i in
            let theta = (Double.pi / 2) * (Double(i) + 0.5) / Double(count)
            return Int32((_sin(theta) * 32768).rounded())
        }
    }

    /// The incoming take's gain at window position `i`, in Q15 (32768 is 1).
    public func incomingGain(_ i: Int) -> Int32 { gainIn[i] }
    /// The outgoing take's gain at window position `i`, in Q15.
    public func outgoingGain(_ i: Int) -> Int32 { gainIn[frames - 1 - i] }

    /// Mixes one join into `output`, in place. All three buffers hold `frames` interleaved
    /// frames of `channels` channels, aligned on the output's positions J − half ..< J + half:
    /// - `outgoing`: the outgoing take's last `half` kept frames, then its `half` frames after its cut;
    /// - `incoming`: the incoming take's `half` frames before its cut, then its first `half` kept frames;
    /// - `output`: receives the mix (it may be `incoming`'s storage).
    public func mix(outgoing: UnsafeBufferPointer<Int16>, incoming: UnsafeBufferPointer<Int16>,
                    into output: UnsafeMutableBufferPointer<Int16>) {
        let values = frames * channels
        precondition(outgoing.count >= values && incoming.count >= values && output.count >= values,
                     "a join's crossfade needs \(frames) frames of \(channels) channels on each side")
        gainIn.withUnsafeBufferPointer { g in
            for i in 0..<frames {
                let gi = g[i], go = g[frames - 1 - i]
                for c in 0..<channels {
                    let k = i * channels + c
                    let v = (Int64(outgoing[k]) * Int64(go) + Int64(incoming[k]) * Int64(gi) + (1 << 14)) >> 15
                    output[k] = Int16(clamping: v)
                }
            }
        }
    }
}
