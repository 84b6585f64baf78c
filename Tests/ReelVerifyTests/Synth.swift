import Foundation
import Synchronization
import XCTest

/// The synthetic sources of /work/shared/test-sources.md, written here independently of reeld
/// (and of ReelCore's generators), and a simulated pause/resume recording of them encoded with
/// the ffmpeg CLI: the Swift twin of Tests/e2e/synth.py, so `reelctl verify` and the Python
/// oracle can be run on the same files.
struct SynthError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

enum Synth {
    static let width = 320, height = 180, fps = 15, rate = 48000
    static let white: UInt8 = 235, black: UInt8 = 16, neutral: UInt8 = 128

    /// Source frame spans kept: the first pause starts one frame after flash 2 (beep 2 is cut
    /// short at the pause, its flash kept); the second resumes two thirds into beep 5 (flash 5
    /// falls in the pause, the beep's tail survives). The same as test_verify_oracle.py.
    static let spans: [Range<Int>] = [0..<31, 40..<66, 76..<98]

    struct Variant: Sendable {
        var extraFrames: [(after: Int, source: Int)] = []   // leaked into the output with their audio
        var audioShiftMs = 0                                // audio delayed (silence in front, tail cut)
        var audioGapAt: Int? = nil                          // silence inserted before output frame i
        var audioGapMs = 0
        var ptsGapAtFrame: Int? = nil                       // output pts jump by extra frames there
        var ptsGapFrames = 0
        var spans: [Range<Int>]? = nil                      // instead of the default pause schedule
        var skewPpm = 0                                     // audio clock skew: beep k at round(k rate (1 + P/1e6))
        var fps = Synth.fps
    }

    static let variants: [String: Variant] = [
        "good": Variant(),
        "audio_late_40ms": Variant(audioShiftMs: 40),
        "frame_from_pause": Variant(extraFrames: [(31, 35)]),           // source frame 35 = 2333 ms, inside pause 1
        "pts_gap_at_resume": Variant(ptsGapAtFrame: 31, ptsGapFrames: 2),
        "audio_gap_at_resume": Variant(audioGapAt: 31, audioGapMs: 50),
        // 10 s without pauses from a sound card 300 ppm fast, counted at the nominal rate:
        // beep k lands 0.3 ms per second late, the drift a recorder without drift lock shows
        "audio_skew_300ppm": Variant(spans: [0..<150], skewPpm: 300),
        // beep 2 cut to 66.7 ms by the pause, beep 3 whole from the resume: one tone, no dip
        "beeps_joined_at_resume": Variant(spans: [0..<31, 45..<98]),
        // CI's e2e run at 30 fps: beep 2 cut to 66.7 ms by the pause, the resume one frame after
        // flash 3 (beep 3's last 66.7 ms): one 133 ms tone, its second part a cut tail
        "beep_cut_by_pause_and_resume": Variant(spans: [0..<62, 91..<180], fps: 30),
    ]

    static func frameMs(_ n: Int, fps: Int = Synth.fps) -> UInt32 { UInt32(truncatingIfNeeded: n * 1000 / fps) }
    static func isFlash(_ n: Int, fps: Int = Synth.fps) -> Bool { n > 0 && n / fps > (n - 1) / fps }

    /// Frame n as yuv420p, exactly per the contract.
    static func frame(_ n: Int, fps: Int = Synth.fps) -> [UInt8] {
        let stripH = height / 8, cellW = width / 32
        var y = [UInt8](repeating: 0, count: width * height)
        let ms = frameMs(n, fps: fps), flash = isFlash(n, fps: fps)
        for r in 0..<height {
            for c in 0..<width {
                let v: UInt8
                if r < stripH {
                    let cell = c / cellW
                    v = cell < 32 && (ms >> UInt32(31 - cell)) & 1 == 1 ? white : black
                } else if flash {
                    v = white
                } else {
                    v = UInt8(16 + (c + 2 * r + 3 * n) % 80)   // moving ramp, mean ~55
                }
                y[r * width + c] = v
            }
        }
        return y + [UInt8](repeating: neutral, count: width * height / 2)
    }

    /// Source samples [m0, m1): a 100 ms 0.5 full-scale 1 kHz beep at every whole second k >= 1.
    /// With skew P ppm, beep k starts at b_k = round(k * rate * (1 + P/1e6)).
    static func audio(_ m0: Int, _ m1: Int, skewPpm: Int = 0) -> [Int16] {
        func start(_ k: Int) -> Int { (k * rate * (1_000_000 + skewPpm) + 500_000) / 1_000_000 }
        return (m0..<m1).map { m in
            var k = max(1, m / rate + 1)
            while k > 1 && start(k) > m { k -= 1 }
            let j = m - start(k)
            guard j >= 0, j < rate / 10 else { return 0 }
            return Int16((0.5 * sin(2 * Double.pi * 1000 * Double(j) / Double(rate)) * 32767).rounded())
        }
    }

    /// First sample at or after frame n's source time.
    static func sampleAt(_ n: Int, fps: Int) -> Int { (n * rate + fps - 1) / fps }

    /// Encodes the variant into dir/name.mp4 (libx264 High yuv420p + AAC, as synth.py does).
    static func build(_ name: String, _ v: Variant, in dir: String) throws -> String {
        var seq = (v.spans ?? spans).flatMap { Array($0) }
        for e in v.extraFrames.sorted(by: { $0.after > $1.after }) { seq.insert(e.source, at: e.after) }
        let vpath = dir + "/\(name).yuv", apath = dir + "/\(name).pcm", out = dir + "/\(name).mp4"
        var video = Data()
        let fps = v.fps
        for n in seq { video.append(contentsOf: frame(n, fps: fps)) }
        try video.write(to: URL(fileURLWithPath: vpath))
        var chunks = seq.map { audio(sampleAt($0, fps: fps), sampleAt($0 + 1, fps: fps), skewPpm: v.skewPpm) }
        if let at = v.audioGapAt { chunks.insert([Int16](repeating: 0, count: rate * v.audioGapMs / 1000), at: at) }
        var pcm = chunks.flatMap { $0 }
        if v.audioShiftMs > 0 {
            let pad = rate * v.audioShiftMs / 1000
            pcm = Array(([Int16](repeating: 0, count: pad) + pcm).prefix(pcm.count))
        }
        try pcm.withUnsafeBytes { Data($0) }.write(to: URL(fileURLWithPath: apath))
        var vf: [String] = []
        if let at = v.ptsGapAtFrame {
            vf = ["-vf", "setpts=N/(\(fps)*TB)+gte(N\\,\(at))*\(v.ptsGapFrames)/(\(fps)*TB)"]
        }
        let args = ["-nostdin", "-v", "error", "-y",
                    "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "\(width)x\(height)", "-r", "\(fps)", "-i", vpath,
                    "-f", "s16le", "-ar", "\(rate)", "-ac", "1", "-i", apath]
            + vf + ["-fps_mode", "passthrough", "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p",
                    "-profile:v", "high", "-threads", "1", "-c:a", "aac", "-b:a", "128k", out]
        let r = try run("/usr/bin/ffmpeg", args)
        guard r.status == 0 else { throw SynthError("ffmpeg could not encode \(name) (exit \(r.status)): \(r.stderr)") }
        try? FileManager.default.removeItem(atPath: vpath)
        try? FileManager.default.removeItem(atPath: apath)
        return out
    }

    // One directory and one encode per variant for the whole test run.
    private static let cache = Mutex<(dir: String?, files: [String: String])>((nil, [:]))

    static func file(_ name: String) throws -> String {
        try cache.withLock { c in
            if let f = c.files[name] { return f }
            if c.dir == nil {
                let d = NSTemporaryDirectory() + "reel-verify-\(getpid())"
                try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
                c.dir = d
            }
            let f = try build(name, variants[name]!, in: c.dir!)
            c.files[name] = f
            return f
        }
    }

    /// Removes the encoded files (called once, when the test class is done).
    static func removeFiles() {
        cache.withLock { c in
            if let d = c.dir { try? FileManager.default.removeItem(atPath: d) }
            c = (nil, [:])
        }
    }

    struct Run { var status: Int32; var stdout: String; var stderr: String }

    static func run(_ exe: String, _ args: [String]) throws -> Run {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        // Drain stderr on another thread so neither pipe can fill up and stall the child.
        let errData = Mutex<Data>(Data())
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let d = err.fileHandleForReading.readDataToEndOfFile()
            errData.withLock { $0 = d }
            done.signal()
        }
        let o = out.fileHandleForReading.readDataToEndOfFile()
        done.wait()
        p.waitUntilExit()
        return Run(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
                   stderr: String(decoding: errData.withLock { $0 }, as: UTF8.self))
    }
}
