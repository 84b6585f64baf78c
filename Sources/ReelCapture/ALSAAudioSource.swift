import CALSA
import Glibc
import Logging
import ReelCore
import ReelSystem

/// alsa-lib's text for a negative error code.
func alsaErrorText(_ rc: Int32) -> String { String(cString: snd_strerror(rc)).lowercased() }

/// Sample formats Reel takes from a card, in order of preference; all end up as S16.
enum ALSASampleFormat: CaseIterable {
    case s16, s32, float
    var alsa: snd_pcm_format_t {
        switch self {
        case .s16: return SND_PCM_FORMAT_S16_LE
        case .s32: return SND_PCM_FORMAT_S32_LE
        case .float: return SND_PCM_FORMAT_FLOAT_LE
        }
    }
    var bytes: Int { self == .s16 ? 2 : 4 }
    var name: String { self == .s16 ? "S16_LE" : self == .s32 ? "S32_LE" : "FLOAT_LE" }
}

/// One open ALSA capture PCM: the only owner of the `snd_pcm_t` and its status object; closed
/// in `close()` or deinit. Not Sendable: used by the opener, then by the capture thread.
final class ALSAPCM {
    let name: String
    /// The `snd_pcm_t` (an opaque C handle), nil once closed.
    private(set) var pcm: OpaquePointer?
    /// A `snd_pcm_status_t` allocated once, reused for every period; freed in deinit.
    let status: OpaquePointer
    let sampleFormat: ALSASampleFormat
    let periodFrames: Int
    /// Whether `snd_pcm_status` htstamps are on CLOCK_MONOTONIC (else unusable: use read time).
    let monotonicStamps: Bool

    /// Opens `name` for capture at exactly `format` (rate, channels) with periods near 10 ms.
    init(name: String, format: AudioFormat) throws(CaptureError) {
        self.name = name
        var p: OpaquePointer?
        let rc = snd_pcm_open(&p, name, SND_PCM_STREAM_CAPTURE, 0)
        guard rc >= 0, let p else {
            throw CaptureError("cannot open ALSA capture device '\(name)': \(alsaErrorText(rc)) (\(Errno.deviceOpenHint(-rc, kind: "microphone")))")
        }
        // A throwing init never runs deinit: close the PCM here on failure, or the device stays busy.
        do { (sampleFormat, periodFrames, monotonicStamps) = try ALSAPCM.configure(p, name: name, format: format) } catch {
            snd_pcm_close(p)
            throw error
        }
        pcm = p
        var st: OpaquePointer?
        snd_pcm_status_malloc(&st)
        status = st!
    }

    /// Sets the hardware and software parameters; returns the sample format and period chosen.
    private static func configure(_ p: OpaquePointer, name: String, format: AudioFormat) throws(CaptureError) -> (ALSASampleFormat, Int, Bool) {
        var rc: Int32
        var hw: OpaquePointer?
        snd_pcm_hw_params_malloc(&hw)
        defer { snd_pcm_hw_params_free(hw) }
        func fail(_ what: String) -> CaptureError {
            CaptureError("ALSA device '\(name)' cannot capture \(format.sampleRate) Hz \(format.channels) ch: \(what). It offers \(ALSAPCM.describeOffer(p)) (use --sample-rate/--channels to match, or a 'plughw:' device to convert)")
        }
        snd_pcm_hw_params_any(p, hw)
        rc = snd_pcm_hw_params_set_access(p, hw, SND_PCM_ACCESS_RW_INTERLEAVED)
        guard rc >= 0 else { throw fail("no interleaved read access (\(alsaErrorText(rc)))") }
        guard let sf = ALSASampleFormat.allCases.first(where: { snd_pcm_hw_params_test_format(p, hw, $0.alsa) == 0 }) else {
            throw fail("none of the sample formats S16_LE, S32_LE, FLOAT_LE")
        }
        snd_pcm_hw_params_set_format(p, hw, sf.alsa)
        rc = snd_pcm_hw_params_set_channels(p, hw, UInt32(format.channels))
        guard rc >= 0 else { throw fail("not \(format.channels) channels") }
        rc = snd_pcm_hw_params_set_rate(p, hw, UInt32(format.sampleRate), 0)
        guard rc >= 0 else { throw fail("not \(format.sampleRate) Hz") }
        var period = snd_pcm_uframes_t(format.sampleRate / 100)
        var dir: Int32 = 0
        snd_pcm_hw_params_set_period_size_near(p, hw, &period, &dir)
        // 50 periods (about 500 ms) of slack before an overrun when the thread is starved of CPU.
        var buffer = period * 50
        snd_pcm_hw_params_set_buffer_size_near(p, hw, &buffer)
        rc = snd_pcm_hw_params(p, hw)
        guard rc >= 0 else { throw fail("the hardware refused the parameters (\(alsaErrorText(rc)))") }
        var actualPeriod: snd_pcm_uframes_t = 0
        snd_pcm_hw_params_get_period_size(hw, &actualPeriod, &dir)

        var sw: OpaquePointer?
        snd_pcm_sw_params_malloc(&sw)
        defer { snd_pcm_sw_params_free(sw) }
        // Timestamps on CLOCK_MONOTONIC when the device (or plugin) supports them; otherwise
        // the source falls back to the read time (see `monotonicStamps`).
        var monotonic = true
        for withStamps in [true, false] {
            snd_pcm_sw_params_current(p, sw)
            if withStamps {
                snd_pcm_sw_params_set_tstamp_mode(p, sw, SND_PCM_TSTAMP_ENABLE)
                if snd_pcm_sw_params_set_tstamp_type(p, sw, SND_PCM_TSTAMP_TYPE_MONOTONIC) < 0 { continue }
            }
            snd_pcm_sw_params_set_avail_min(p, sw, actualPeriod)
            snd_pcm_sw_params_set_start_threshold(p, sw, 1)
            rc = snd_pcm_sw_params(p, sw)
            if rc >= 0 { monotonic = withStamps; break }
            if !withStamps { throw CaptureError("ALSA device '\(name)': cannot set software parameters (\(alsaErrorText(rc)))") }
        }
        return (sf, max(1, Int(actualPeriod)), monotonic)
    }

    deinit {
        close()
        snd_pcm_status_free(status)
    }

    func close() {
        if let pcm { snd_pcm_close(pcm) }
        pcm = nil
    }

    /// "S16_LE, S32_LE; 1-2 channels; 8000-192000 Hz" from a fresh configuration space.
    static func describeOffer(_ p: OpaquePointer) -> String {
        var hw: OpaquePointer?
        snd_pcm_hw_params_malloc(&hw)
        defer { snd_pcm_hw_params_free(hw) }
        guard snd_pcm_hw_params_any(p, hw) >= 0 else { return "nothing readable" }
        let formats = ALSASampleFormat.allCases.filter { snd_pcm_hw_params_test_format(p, hw, $0.alsa) == 0 }.map(\.name)
        var cmin: UInt32 = 0, cmax: UInt32 = 0, rmin: UInt32 = 0, rmax: UInt32 = 0
        var dir: Int32 = 0
        snd_pcm_hw_params_get_channels_min(hw, &cmin)
        snd_pcm_hw_params_get_channels_max(hw, &cmax)
        snd_pcm_hw_params_get_rate_min(hw, &rmin, &dir)
        snd_pcm_hw_params_get_rate_max(hw, &rmax, &dir)
        let ch = cmin == cmax ? "\(cmin)" : "\(cmin)-\(cmax)"
        let rate = rmin == rmax ? "\(rmin)" : "\(rmin)-\(rmax)"
        return "\(formats.isEmpty ? "no S16/S32/float format" : formats.joined(separator: ", ")); \(ch) channels; \(rate) Hz"
    }
}

/// `--audio alsa:NAME`: an ALSA capture device through alsa-lib on its own thread, delivered in
/// periods of about 10 ms as S16. Each chunk's capture time comes from `snd_pcm_status`
/// (htstamp on CLOCK_MONOTONIC minus the frames still buffered); `sample` is the running sample
/// index of the source. An overrun or suspend is recovered with `snd_pcm_recover` and the lost
/// span, estimated from the timestamps, is skipped in `sample` so the pipeline fills silence.
///
/// @unchecked Sendable: `pcm` and `scratch` are used by the initialiser, then only by the
/// capture thread; counters are guarded by CaptureThread's monitor or `stats`.
public final class ALSAAudioSource: CaptureThread, CaptureSource, @unchecked Sendable {
    public let deviceName: String
    public let format: AudioFormat
    private let pcm: ALSAPCM
    private let logger: Logger
    // Unsafe pointer: one period of native samples, read by snd_pcm_readi; freed in deinit.
    private let scratch: UnsafeMutableRawPointer
    private let stats = Monitor()
    private var lost: Int64 = 0
    private var xruns: Int64 = 0
    /// Periods added to the pool for the pre-roll (0 without one).
    public let extraSlots: Int

    /// `poolSlots` periods (about 10 ms each) may wait for the pipeline: 2 s by default, so an
    /// encoder stall (a keyframe, a slow disk) never costs audio; only a longer one fills silence.
    /// `preRoll` (standby's) adds `extraSlots` periods to hold it, counted in the period chosen.
    public init(device: String, format: AudioFormat, logger: Logger, poolSlots: Int = 200, preRoll: PreRoll = PreRoll(0)) throws {
        pcm = try ALSAPCM(name: device, format: format)
        extraSlots = preRoll.audioSlots(chunkFrames: pcm.periodFrames, sampleRate: format.sampleRate)
        deviceName = device
        self.format = format
        self.logger = logger
        scratch = .allocate(byteCount: pcm.periodFrames * format.channels * 4, alignment: 16)
        super.init(pool: FramePool(slots: poolSlots + extraSlots, slotBytes: pcm.periodFrames * format.channels * 2), name: "reel-audio-alsa")
    }
    deinit { scratch.deallocate() }

    public var description: String {
        "alsa \(deviceName) \(format.sampleRate) Hz \(format.channels) ch \(pcm.sampleFormat.name)"
    }
    /// Samples lost to overruns and suspends (filled with silence), and how many times.
    public var lostSamples: (samples: Int64, events: Int64) { stats.withLock { (lost, xruns) } }

    public func start(at t0: Nanos, sink: any MediaSink) {
        launch { [self] in
            let failure = capture(sink: sink)
            pcm.close()
            if let msg = failure {
                logger.error("\(msg)")
                // The one blocking delivery: a terminal event that must not be dropped.
                _ = sink.deliver(.sourceFailed(msg), wait: true)
            }
        }
    }

    private func capture(sink: any MediaSink) -> String? {
        guard let p = pcm.pcm else { return "ALSA device '\(deviceName)' is closed" }
        var rc = snd_pcm_start(p)
        guard rc >= 0 else { return "cannot start capture on ALSA device '\(deviceName)': \(alsaErrorText(rc))" }
        let rate = format.sampleRate, ch = format.channels
        var sample: Int64 = 0
        var expectedNext: Nanos?
        var recovered = false
        var restartedAt: Nanos?     // when the last recovery restarted a prepared (emptied) PCM
        var ts = timespec()
        var chunks: Int64 = 0, droppedChunks: Int64 = 0
        var warnedClock = false
        defer {
            let (l, x) = lostSamples
            logger.info("ALSA device '\(deviceName)': \(sample) samples, \(chunks) periods read, \(x) overruns/suspends losing \(l) samples, \(droppedChunks) periods not delivered (pipeline behind, or finishing); lost spans inside the recording are filled with silence")
        }
        while !isStopping {
            rc = snd_pcm_wait(p, 100)  // wakes at least every 100 ms to see `stop`
            if rc == 0 { continue }
            var n = rc < 0 ? Int(rc) : snd_pcm_readi(p, scratch, snd_pcm_uframes_t(pcm.periodFrames))
            if n == -Int(EAGAIN) || n == -Int(EINTR) { continue }
            if n == -Int(EPIPE) || n == -Int(ESTRPIPE) {
                let what = n == -Int(EPIPE) ? "overrun" : "suspend"
                let r = snd_pcm_recover(p, Int32(n), 1)
                guard r >= 0 else { return "ALSA device '\(deviceName)' failed: cannot recover from \(what): \(alsaErrorText(r)) (reconnect it; see 'reelctl devices')" }
                if snd_pcm_state(p) != SND_PCM_STATE_RUNNING {
                    // Prepared, so its buffer was dropped: what is read from now on was captured
                    // after this instant. (A resumed suspend may still hold older periods.)
                    restartedAt = SystemClock.now()
                    _ = snd_pcm_start(p)
                } else {
                    restartedAt = nil
                }
                stats.withLock { xruns += 1 }
                recovered = true
                continue
            }
            if n < 0 {
                return "ALSA device '\(deviceName)' failed: \(alsaErrorText(Int32(n))) (is it unplugged? see 'reelctl devices')"
            }
            if n == 0 { continue }
            // Capture time of the first frame just read, from the status taken right after.
            var time = SystemClock.now() - format.sampleTime(Int64(n))
            if !pcm.monotonicStamps, !warnedClock {
                logger.warning("ALSA device '\(deviceName)' has no CLOCK_MONOTONIC timestamps; using the read time (audio sync may be off by a period)")
                warnedClock = true
            }
            if pcm.monotonicStamps, snd_pcm_status(p, pcm.status) >= 0 {
                snd_pcm_status_get_htstamp(pcm.status, &ts)
                let ht = Nanos(ts.tv_sec) * nanosPerSecond + Nanos(ts.tv_nsec)
                if ht > 0 {
                    time = alsaCaptureTime(htstamp: ht, delayFrames: Int64(snd_pcm_status_get_delay(pcm.status)),
                                           framesJustRead: Int64(n), sampleRate: rate)
                }
            }
            if recovered, let restartedAt {
                let t = alsaFirstCaptureTimeAfterRestart(stamped: time, restartedAt: restartedAt,
                                                         slack: format.sampleTime(Int64(pcm.periodFrames)))
                if t != time {
                    logger.warning("ALSA device '\(deviceName)': its timestamp puts the first period after the overrun \((t - time) / 1_000_000) ms before the restart (stale); timed from the restart instead")
                    time = t
                }
            }
            if recovered, let expectedNext {
                let gap = alsaLostSamples(expectedTime: expectedNext, actualTime: time, sampleRate: rate,
                                          tolerance: Int64(pcm.periodFrames / 2))
                if gap > 0 {
                    sample += gap
                    stats.withLock { lost += gap }
                    logger.warning("ALSA device '\(deviceName)': overrun lost \(gap) samples; filled with silence")
                }
            }
            recovered = false
            expectedNext = time + format.sampleTime(Int64(n))
            chunks += 1
            if let slot = pool.tryAcquire() {
                convert(frames: n * ch, into: pool.buffer(slot))
                if !sink.deliver(.audio(slot: slot, frames: n, sample: sample, time: time), wait: false) {
                    pool.release(slot); countDrop(); droppedChunks += 1
                }
            } else {
                countDrop(); droppedChunks += 1  // the pipeline holds every slot: this chunk becomes silence
            }
            sample += Int64(n)
            n = 0
        }
        _ = snd_pcm_drop(p)
        return nil
    }

    /// Native samples in `scratch` to S16 in `dst`.
    private func convert(frames count: Int, into dst: UnsafeMutableRawBufferPointer) {
        // Safe: scratch holds a period of native samples and dst a period of S16 (pool slot size).
        let out = dst.baseAddress!.assumingMemoryBound(to: Int16.self)
        switch pcm.sampleFormat {
        case .s16:
            dst.baseAddress!.copyMemory(from: scratch, byteCount: count * 2)
        case .s32:
            let src = scratch.assumingMemoryBound(to: Int32.self)
            for i in 0..<count { out[i] = Int16(truncatingIfNeeded: src[i] >> 16) }
        case .float:
            let src = scratch.assumingMemoryBound(to: Float.self)
            for i in 0..<count { out[i] = s16(fromFloat: src[i]) }
        }
    }
}

/// A float sample in [-1, 1] as S16, clamped (sample values, not timestamps, may be floats).
@inline(__always) func s16(fromFloat f: Float) -> Int16 {
    let v = (f * 32767).rounded()
    return v >= 32767 ? 32767 : v <= -32768 ? -32768 : Int16(v)
}
