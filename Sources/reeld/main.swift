import ArgumentParser
import Dispatch
import Foundation
import Logging
import ReelControl
import ReelCore
import ReelDaemon
import ReelMedia

struct Reeld: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reeld",
        abstract: "Reel recorder daemon: camera + microphone to one continuous MP4, driven by reelctl.",
        discussion: """
        reeld listens on a Unix socket (--socket, else $REEL_SOCKET, else /run/reel/reeld.sock) for \
        reelctl's start, pause, resume, stop and status. Recordings are written as NAME.mp4.part \
        (fragmented, playable if interrupted) and renamed to NAME.mp4 when complete. SIGTERM or \
        SIGINT finish any recording before exiting. Under systemd it speaks the notify protocol.
        """)

    @Option(help: "Control socket path (default: $REEL_SOCKET or /run/reel/reeld.sock).")
    var socket: String?

    @Option(name: .customLong("output-dir"), help: "Directory for recordings (created if missing).")
    var outputDir = "/var/lib/reel"

    @Option(help: "Video source: a V4L2 camera '/dev/videoN' (or 'v4l2:/dev/videoN'), 'test' (the synthetic sync source) or 'none'. See --list-devices.")
    var video = "test"

    @Option(help: "Audio source: an ALSA capture device 'alsa:NAME' (alsa:hw:1,0, alsa:plughw:1,0, alsa:default), 'test' (the synthetic sync source) or 'none'.")
    var audio = "test"

    @Flag(name: .customLong("list-devices"), help: "Print the V4L2 cameras (formats, sizes, frame rates) and ALSA capture devices, then exit.")
    var listDevices = false

    @Flag(help: "With --list-devices: print JSON (the protocol's devices object).")
    var json = false

    @Option(help: "Video size WxH (even numbers).")
    var size = "640x360"

    @Option(help: "Frame rate: N or N/D (e.g. 30, 30000/1001).")
    var fps = "30"

    @Option(name: .customLong("pixel-format"), help: "Source pixel format: yuyv, uyvy, nv12, yuv420 (= i420); cameras also mjpeg.")
    var pixelFormat = "yuyv"

    @Option(name: .customLong("sample-rate"), help: "Audio sample rate in Hz.")
    var sampleRate = 48000

    @Option(help: "Audio channels (1-8).")
    var channels = 1

    @Option(help: "x264 preset (ultrafast ... placebo).")
    var preset = "veryfast"

    @Option(help: "x264 tune (film, animation, grain, stillimage, fastdecode, zerolatency).")
    var tune: String?

    @Option(help: "x264 constant rate factor (0-51); ignored when --bitrate is set.")
    var crf = 23

    @Option(help: "Video bitrate in kb/s (average bitrate instead of CRF).")
    var bitrate: Int?

    @Option(help: "Keyframe interval in seconds.")
    var keyint = 2

    @Option(help: "H.264 profile: baseline, main, high.")
    var profile = "high"

    @Option(name: .customLong("audio-bitrate"), help: "AAC bitrate in b/s.")
    var audioBitrate = 128_000

    @Option(name: .customLong("test-audio-skew-ppm"), help: "Skew of the synthetic audio clock against CLOCK_MONOTONIC, in ppm.")
    var testAudioSkewPpm: Int64 = 0

    @Flag(help: "Deliver the synthetic sources as fast as the pipeline takes them (same virtual timestamps).")
    var unpaced = false

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    mutating func validate() throws {
        _ = try makeConfig()
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("invalid --log-level '\(logLevel)' (use trace, debug, info, notice, warning, error or critical)")
        }
    }

    func makeConfig() throws -> RecorderConfig {
        let parts = size.split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w % 2 == 0, h % 2 == 0,
              (16...7680).contains(w), (16...4320).contains(h) else {
            throw ValidationError("invalid --size '\(size)': use WxH with even numbers, e.g. 640x360")
        }
        guard let rate = Rational(parsing: fps), rate.num * 1 <= 240 * rate.den else {
            throw ValidationError("invalid --fps '\(fps)': use N or N/D up to 240, e.g. 30 or 30000/1001")
        }
        guard let cpf = CameraPixelFormat(name: pixelFormat) else {
            throw ValidationError("invalid --pixel-format '\(pixelFormat)' (use \(CameraPixelFormat.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        let pf = cpf.delivered
        guard (8000...192_000).contains(sampleRate) else { throw ValidationError("invalid --sample-rate \(sampleRate): use 8000 to 192000 Hz") }
        guard (1...8).contains(channels) else { throw ValidationError("invalid --channels \(channels): use 1 to 8") }
        guard (0...51).contains(crf) else { throw ValidationError("invalid --crf \(crf): use 0 to 51") }
        guard (1...60).contains(keyint) else { throw ValidationError("invalid --keyint \(keyint): use 1 to 60 seconds") }
        guard abs(testAudioSkewPpm) < 100_000 else { throw ValidationError("invalid --test-audio-skew-ppm \(testAudioSkewPpm): use -99999 to 99999") }
        let vf = VideoFormat(width: w, height: h, fps: rate, pixelFormat: pf)
        let af = AudioFormat(sampleRate: sampleRate, channels: channels)
        let v: RecorderConfig.Video
        switch video {
        case "test":
            guard cpf != .mjpeg else { throw ValidationError("--pixel-format mjpeg needs a camera: the test source renders yuyv, uyvy, nv12 or yuv420") }
            v = .test(vf)
        case "none": v = .none
        default:
            let path = video.hasPrefix("v4l2:") ? String(video.dropFirst(5)) : video
            guard path.hasPrefix("/dev/") else {
                throw ValidationError("unsupported --video '\(video)' (use a camera such as /dev/video0 or v4l2:/dev/video0, 'test' or 'none'; see 'reeld --list-devices')")
            }
            guard !unpaced else { throw ValidationError("--unpaced applies to the synthetic sources only, not to camera \(path)") }
            v = .v4l2(device: path, CameraRequest(width: w, height: h, fps: rate, pixelFormat: cpf))
        }
        let a: RecorderConfig.Audio
        switch audio {
        case "test": a = .test(af, skewPpm: testAudioSkewPpm)
        case "none": a = .none
        default:
            guard audio.hasPrefix("alsa:"), audio.count > 5 else {
                throw ValidationError("unsupported --audio '\(audio)' (use an ALSA device such as alsa:default or alsa:hw:1,0, 'test' or 'none'; see 'reeld --list-devices')")
            }
            guard !unpaced else { throw ValidationError("--unpaced applies to the synthetic sources only, not to \(audio)") }
            a = .alsa(device: String(audio.dropFirst(5)), af)
        }
        if case .none = v, case .none = a { throw ValidationError("--video none and --audio none: nothing to record") }
        var h264 = H264Settings()
        h264.preset = preset; h264.tune = tune; h264.crf = crf; h264.bitrateKbps = bitrate
        h264.keyintSeconds = keyint; h264.profile = profile
        var aac = AACSettings()
        aac.bitrate = audioBitrate
        let dir = outputDir.hasPrefix("/") ? outputDir : FileManager.default.currentDirectoryPath + "/" + outputDir
        return RecorderConfig(outputDir: dir, video: v, audio: a, paced: !unpaced, h264: h264, aac: aac)
    }

    func run() throws {
        if listDevices {
            let list = listCaptureDevices()
            print(json ? try Wire.text(list) : DevicesText.render(list), terminator: json ? "\n" : "")
            return
        }
        let env = ProcessInfo.processInfo.environment
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let journal = env["JOURNAL_STREAM"] != nil
        LoggingSystem.bootstrap { _ in ReelLogHandler(level: level, journal: journal) }
        let logger = Logger(label: "reeld")
        signal(SIGPIPE, SIG_IGN)

        let config = try makeConfig()
        let notifier = Notifier(environment: env)
        let recorder = Recorder(config: config, logger: logger)
        recorder.onStateChange = { notifier.send("STATUS=\($0)") }
        let path = SocketPath.resolve(explicit: socket, environment: env)
        let server: ControlServer
        do {
            server = try ControlServer(path: path, handler: recorder, logger: logger)
        } catch {
            logger.critical("\(error)")
            throw ExitCode(1)
        }
        server.start()
        logger.notice("listening on \(path); recordings go to \(config.outputDir)")
        notifier.send("READY=1\nSTATUS=idle")

        let signals = DispatchQueue(label: "reel-signals")
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let src = DispatchSource.makeSignalSource(signal: sig, queue: signals)
            src.setEventHandler {
                logger.notice("received \(sig == SIGTERM ? "SIGTERM" : "SIGINT"), shutting down")
                notifier.send("STOPPING=1")
                recorder.shutdown()
                server.shutdown()
                Foundation.exit(0)
            }
            src.resume()
            sources.append(src)
        }
        withExtendedLifetime(sources) { dispatchMain() }
    }
}

Reeld.main()
