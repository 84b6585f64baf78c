import ArgumentParser
import Dispatch
import Foundation
import Logging
import ReelControl
import ReelCore
import ReelDaemon
import ReelMedia

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Reel recorder daemon: camera + microphone to one continuous MP4, driven by reelctl.",
        discussion: """
        Settings come from, in order of precedence: these flags, REEL_* environment variables \
        (REEL_OUTPUT_DIR for output_dir, ...), the config file (--config, else $REEL_CONFIG, else \
        /etc/reel/reeld.toml if present; every key is documented there), then the defaults shown. \
        SIGHUP re-reads the file for the next recording. reeld listens on a Unix socket (the one \
        systemd passes through socket activation, else --socket) for reelctl's start, pause, \
        resume, stop and status, from root, its own user and members of --control-group. \
        Recordings are written as NAME.mp4.part (fragmented, playable if interrupted) and renamed \
        to NAME.mp4 when complete; a .part left by a crash is recovered at start-up. SIGTERM or \
        SIGINT finish any recording before exiting. Under systemd it speaks the notify and \
        watchdog protocols.
        """)

    @OptionGroup var options: DaemonOptions

    @Flag(name: .customLong("check-config"), help: "Check the configuration, print every setting with where it came from, and exit (0 if valid, 1 if not).")
    var checkConfig = false

    @Flag(name: .customLong("list-devices"), help: "Print the V4L2 cameras (formats, sizes, frame rates) and ALSA capture devices, then exit.")
    var listDevices = false

    @Flag(help: "With --list-devices: print JSON (the protocol's devices object).")
    var json = false

    func run() throws {
        if listDevices {
            let list = listCaptureDevices()
            print(json ? try Wire.text(list) : DevicesText.render(list), terminator: json ? "\n" : "")
            return
        }
        let env = ProcessInfo.processInfo.environment
        let settings: DaemonSettings
        let config: RecorderConfig
        do {
            (settings, config) = try options.load(environment: env)
        } catch {
            FileHandle.standardError.write(Data("reeld: \(error)\n".utf8))
            throw ExitCode(1)
        }
        if checkConfig {
            for w in settings.warnings { FileHandle.standardError.write(Data("reeld: warning: \(w)\n".utf8)) }
            print("reeld: configuration is valid (file: \(settings.filePath ?? "none"))")
            print(settings.report)
            return
        }
        let level = Logger.Level(rawValue: settings.string(.logLevel)) ?? .info
        let journal = JournalStream.isStderr(environment: env)
        LoggingSystem.bootstrap { _ in ReelLogHandler(level: level, journal: journal) }
        let logger = Logger(label: "reeld")
        signal(SIGPIPE, SIG_IGN)
        FFmpegLog.warningsOnly()
        LibraryLogging.route(to: logger)
        if let f = settings.filePath { logger.info("configuration read from \(f)") }
        settings.warnings.forEach { logger.warning("\($0)") }

        let notifier = Notifier(environment: env)
        let watchdog = WatchdogEnvironment.timeoutNs(environment: env)
        // The Notifier and watchdog have read these; the on_finish program must not inherit them.
        for v in ["WATCHDOG_USEC", "WATCHDOG_PID", "NOTIFY_SOCKET"] { unsetenv(v) }
        let recorder = Recorder(config: config, logger: logger)
        let supervisor = Supervisor(notifier: notifier, health: recorder.health, watchdogNs: watchdog, logger: logger,
                                    statusLine: { recorder.statusLine() })
        recorder.onStateChange = { line in
            supervisor.noteStatusSent(line)
            notifier.send("STATUS=\(line)")
        }
        supervisor.onTick = { recorder.tick() }
        recorder.recoverPartFiles()

        let policy = PeerPolicy(groupName: settings.optionalString(.controlGroup), userName: settings.optionalString(.controlUser))
        policy.warnings.forEach { logger.warning("\($0)") }
        let server: ControlServer
        let listening: String
        do {
            if let passed = try SocketActivation.controlSocket(environment: env) {
                server = ControlServer(listeningFD: passed.fd, handler: recorder, logger: logger,
                                       maxClients: ControlServer.defaultMaxClients, authorize: policy.authorizer)
                listening = "socket-activated fd \(passed.fd)\(passed.name.map { " (\($0))" } ?? "")"
            } else {
                let path = settings.string(.socket)
                server = try ControlServer(path: path, handler: recorder, logger: logger,
                                           maxClients: ControlServer.defaultMaxClients, authorize: policy.authorizer)
                listening = path
            }
        } catch {
            logger.critical("\(error)")
            notifier.send("STATUS=error: \(error)")
            throw ExitCode(1)
        }
        server.attach(events: recorder.events)
        server.start()
        // Signal handling is in place before READY=1: a reload or stop right after never kills
        // reeld (SIGHUP's default action) or skips finishing a recording.
        let signals = DispatchQueue(label: "reel-signals")
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let src = DispatchSource.makeSignalSource(signal: sig, queue: signals)
            src.setEventHandler {
                logger.notice("received \(sig == SIGTERM ? "SIGTERM" : "SIGINT"), shutting down")
                notifier.send("STOPPING=1")
                recorder.shutdown()
                FinishHook.waitForRunning(logger: logger)
                supervisor.stop()
                server.shutdown()
                Foundation.exit(0)
            }
            src.resume()
            sources.append(src)
        }
        signal(SIGHUP, SIG_IGN)
        let hup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: signals)
        hup.setEventHandler {
            notifier.send("RELOADING=1")
            do {
                let (fresh, cfg) = try options.load(environment: env)
                recorder.reconfigure(cfg)
                let fixed: [SettingKey] = [.socket, .controlGroup, .controlUser, .logLevel]
                let changed = fixed.filter { fresh.values[$0] != settings.values[$0] }.map(\.rawValue)
                if !changed.isEmpty { logger.warning("SIGHUP: \(changed.joined(separator: ", ")) changed but apply only after a restart ('systemctl restart reeld')") }
                logger.notice("SIGHUP: configuration re-read\(fresh.filePath.map { " from \($0)" } ?? ""); it applies from the next recording")
            } catch {
                logger.error("SIGHUP: configuration not reloaded, keeping the current one: \(error)")
            }
            notifier.send("READY=1")
        }
        hup.resume()
        sources.append(hup)
        logger.notice("listening on \(listening) for \(policy.summary); recordings go to \(config.outputDir)")
        notifier.send("READY=1\nSTATUS=idle")
        supervisor.start()  // after READY=1: the first WATCHDOG=1 follows it
        withExtendedLifetime(sources) { dispatchMain() }
    }
}


/// The settings both subcommands share: sources, encoders, storage, control; with the
/// precedence flags > REEL_* environment > config file > defaults.
struct DaemonOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Config file (default: $REEL_CONFIG, else /etc/reel/reeld.toml if it exists).", valueName: "path"))
    var config: String?

    @Option(help: "Control socket path when not socket-activated (default: /run/reel/reeld.sock).")
    var socket: String?

    @Option(name: .customLong("output-dir"), help: "Directory for recordings, created if missing (default: /var/lib/reel).")
    var outputDir: String?

    @Option(help: "Video source: a V4L2 camera '/dev/videoN' (or 'v4l2:/dev/videoN'), 'y4m:PATH' (a YUV4MPEG2 file), 'test' (the synthetic sync source) or 'none'; see --list-devices (default: /dev/video0).")
    var video: String?

    @Option(help: "Audio source: an ALSA capture device 'alsa:NAME' (alsa:hw:1,0, alsa:plughw:1,0, alsa:default), 'wav:PATH' (16-bit PCM), 'test' (the synthetic sync source) or 'none' (default: alsa:default).")
    var audio: String?

    @Option(help: "Video size WxH, even numbers (default: 640x360).")
    var size: String?

    @Option(help: "Frame rate: N or N/D from 1 to 240, e.g. 30 or 30000/1001 (default: 30).")
    var fps: String?

    @Option(name: .customLong("pixel-format"), help: "Source pixel format: yuyv, uyvy, nv12, yuv420 (= i420); cameras also mjpeg (default: yuyv).")
    var pixelFormat: String?

    @Option(name: .customLong("sample-rate"), help: "Audio sample rate in Hz (default: 48000).")
    var sampleRate: Int?

    @Option(help: "Audio channels, 1-8 (default: 1).")
    var channels: Int?

    @Option(help: "x264 preset, ultrafast ... placebo (default: veryfast).")
    var preset: String?

    @Option(help: "x264 tune: film, animation, grain, stillimage, fastdecode, zerolatency (default: none).")
    var tune: String?

    @Option(help: "x264 constant rate factor, 1-51; ignored when --bitrate is set (default: 23).")
    var crf: Int?

    @Option(help: "Video bitrate in kb/s, average bitrate instead of CRF; 0 means CRF (default: 0).")
    var bitrate: Int?

    @Option(help: "Keyframe interval in seconds (default: 2).")
    var keyint: Int?

    @Option(help: "H.264 profile: baseline, main, high (default: high).")
    var profile: String?

    @Option(name: .customLong("audio-bitrate"), help: "AAC bitrate in b/s (default: 128000).")
    var audioBitrate: Int?

    @Option(name: .customLong("control-group"), help: "Group whose members may use the control socket, besides root and reeld's own user (default: reel).")
    var controlGroup: String?

    @Option(name: .customLong("control-user"), help: "One more user allowed to use the control socket (default: none).")
    var controlUser: String?

    @Option(name: .customLong("min-free-mb"), help: "Refuse to start, and finish a recording, below this much free space in the output directory, in MB; 0 disables (default: 500).")
    var minFreeMb: Int?

    @Option(name: .customLong("on-finish"), help: "Absolute path of a program run (no shell) after each completed recording with the file's path as its argument (default: none; arguments go in the config file).")
    var onFinish: String?

    @Option(name: .customLong("on-finish-timeout"), help: "Seconds before the on_finish program is killed (default: 120).")
    var onFinishTimeout: Int?

    @Option(help: "When a recording is synced to disk: fragment (each 0.5 s fragment, by a thread of its own) or none (the kernel's writeback) (default: fragment).")
    var fsync: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error, critical (default: info).")
    var logLevel: String?

    @Option(name: .customLong("test-audio-skew-ppm"), help: "Skew of the synthetic audio clock against CLOCK_MONOTONIC, in ppm.")
    var testAudioSkewPpm: Int64 = 0

    @Flag(help: "Deliver the synthetic sources as fast as the pipeline takes them (same virtual timestamps).")
    var unpaced = false

    @Flag(inversion: .prefixedNo, help: "Resample the audio so its clock follows CLOCK_MONOTONIC (keeps A/V in sync on a drifting sound card).")
    var driftLock = true

    /// The flags given on the command line, as settings (they beat environment and file).
    var flagSettings: [SettingKey: SettingValue] {
        var f: [SettingKey: SettingValue] = [:]
        func s(_ k: SettingKey, _ v: String?) { if let v { f[k] = .string(v) } }
        func i(_ k: SettingKey, _ v: Int?) { if let v { f[k] = .int(v) } }
        s(.socket, socket); s(.outputDir, outputDir); s(.video, video); s(.audio, audio); s(.size, size); s(.fps, fps)
        s(.pixelFormat, pixelFormat); i(.sampleRate, sampleRate); i(.channels, channels); s(.preset, preset); s(.tune, tune)
        i(.crf, crf); i(.bitrate, bitrate); i(.keyint, keyint); s(.profile, profile); i(.audioBitrate, audioBitrate)
        s(.controlGroup, controlGroup); s(.controlUser, controlUser); i(.minFreeMB, minFreeMb)
        if let onFinish { f[.onFinish] = .strings(onFinish.isEmpty ? [] : [onFinish]) }
        i(.onFinishTimeout, onFinishTimeout); s(.logLevel, logLevel); s(.fsync, fsync)
        return f
    }

    /// Settings and the recorder configuration they make; errors name the file and line,
    /// variable or flag, and the key.
    func load(environment: [String: String]) throws -> (DaemonSettings, RecorderConfig) {
        let s = try DaemonSettings.resolve(configPath: config, environment: environment, flags: flagSettings)
        do {
            return (s, try makeConfig(s))
        } catch let e as ValidationError {
            // Name where the offending key was set ("invalid --video 'x'" came from the file?).
            let key = SettingKey.allCases.first { e.message.contains($0.flag + " ") || e.message.contains($0.flag + ":") }
            if let key, let origin = s.origins[key], origin != .flag(key.flag) {
                throw ConfigError("\(origin): key '\(key.rawValue)': \(e.message)")
            }
            throw ConfigError(e.message)
        }
    }

    func makeConfig(_ s: DaemonSettings) throws -> RecorderConfig {
        let size = s.string(.size), fps = s.string(.fps), pixelFormat = s.string(.pixelFormat)
        let sampleRate = s.int(.sampleRate), channels = s.int(.channels), crf = s.int(.crf), keyint = s.int(.keyint)
        let video = s.string(.video), audio = s.string(.audio), preset = s.string(.preset), tune = s.optionalString(.tune)
        let bitrate: Int? = s.int(.bitrate) == 0 ? nil : s.int(.bitrate)
        let profile = s.string(.profile), audioBitrate = s.int(.audioBitrate), outputDir = s.string(.outputDir)
        let parts = size.split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w % 2 == 0, h % 2 == 0,
              (16...7680).contains(w), (16...4320).contains(h) else {
            throw ValidationError("invalid --size '\(size)': use WxH with even numbers, e.g. 640x360")
        }
        // Checked by DaemonSettings already; bounds first, so that no value can overflow here either.
        guard let rate = Rational(parsing: fps), rate.den <= 1_000_000, rate.num >= rate.den, rate.num <= 240 * rate.den else {
            throw ValidationError("invalid --fps '\(fps)': use N or N/D from 1 to 240, e.g. 30 or 30000/1001")
        }
        guard let cpf = CameraPixelFormat(name: pixelFormat) else {
            throw ValidationError("invalid --pixel-format '\(pixelFormat)' (use \(CameraPixelFormat.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        let pf = cpf.delivered
        guard (8000...192_000).contains(sampleRate) else { throw ValidationError("invalid --sample-rate \(sampleRate): use 8000 to 192000 Hz") }
        guard (1...8).contains(channels) else { throw ValidationError("invalid --channels \(channels): use 1 to 8") }
        guard (1...51).contains(crf) else { throw ValidationError("invalid --crf \(crf): use 1 to 51") }
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
        case _ where video.hasPrefix("y4m:"):
            let path = String(video.dropFirst(4))
            guard case let .video(f) = try probe(path, video: true).content else { throw ValidationError("\(path) holds no video") }
            v = .y4m(path: path, f)
        default:
            let path = video.hasPrefix("v4l2:") ? String(video.dropFirst(5)) : video
            guard path.hasPrefix("/dev/") else {
                throw ValidationError("unsupported --video '\(video)' (use a camera such as /dev/video0 or v4l2:/dev/video0, 'y4m:PATH', 'test' or 'none'; see 'reeld --list-devices')")
            }
            guard !unpaced else { throw ValidationError("--unpaced applies to the synthetic sources and files only, not to camera \(path)") }
            v = .v4l2(device: path, CameraRequest(width: w, height: h, fps: rate, pixelFormat: cpf))
        }
        let a: RecorderConfig.Audio
        switch audio {
        case "test": a = .test(af, skewPpm: testAudioSkewPpm)
        case "none": a = .none
        case _ where audio.hasPrefix("wav:"):
            let path = String(audio.dropFirst(4))
            guard case let .audio(f) = try probe(path, video: false).content else { throw ValidationError("\(path) holds no audio") }
            a = .wav(path: path, f)
        default:
            guard audio.hasPrefix("alsa:"), audio.count > 5 else {
                throw ValidationError("unsupported --audio '\(audio)' (use an ALSA device such as alsa:default or alsa:hw:1,0, 'wav:PATH', 'test' or 'none'; see 'reeld --list-devices')")
            }
            guard !unpaced else { throw ValidationError("--unpaced applies to the synthetic sources and files only, not to \(audio)") }
            a = .alsa(device: String(audio.dropFirst(5)), af)
        }
        if case .none = v, case .none = a { throw ValidationError("--video none and --audio none: nothing to record") }
        var h264 = H264Settings()
        h264.preset = preset; h264.tune = tune; h264.crf = crf; h264.bitrateKbps = bitrate
        h264.keyintSeconds = keyint; h264.profile = profile
        var aac = AACSettings()
        aac.bitrate = audioBitrate
        let dir = outputDir.hasPrefix("/") ? outputDir : FileManager.default.currentDirectoryPath + "/" + outputDir
        var config = RecorderConfig(outputDir: dir, video: v, audio: a, paced: !unpaced, h264: h264, aac: aac, driftLock: driftLock)
        config.minFreeBytes = Int64(s.int(.minFreeMB)) * 1_000_000
        config.onFinish = s.strings(.onFinish)
        config.onFinishTimeoutNs = Int64(s.int(.onFinishTimeout)) * nanosPerSecond
        config.fsync = FsyncPolicy(rawValue: s.string(.fsync)) ?? .fragment
        return config
    }

    /// Opens a source file once to learn its format; a bad file is a startup error naming it.
    private func probe(_ path: String, video: Bool) throws -> MediaFileReader {
        do { return try MediaFileReader(path: path, video: video) }
        catch { throw ValidationError("\(error)") }
    }
}

Reeld.main()
