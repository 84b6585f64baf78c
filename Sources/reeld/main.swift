import ArgumentParser
import Foundation
import Logging
import ReelCapture
import ReelConfig
import ReelControl
import ReelCore
import ReelMedia
import ReelPipeline
import ReelService
import ReelStorage
import ReelSystem

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Reel recorder daemon: camera + microphone to one continuous MP4, driven by reelctl.",
        usage: "reeld [serve] [--<setting> <value> ...] [<options>]",
        discussion: """
        Settings come from, in order of precedence: these flags, REEL_* environment variables \
        (REEL_OUTPUT_DIR for output_dir, ...), the config file (--config, else $REEL_CONFIG, else \
        /etc/reel/reeld.toml if present; every key is documented there), then the defaults shown. \
        SIGHUP re-reads the file for the next recording. reeld listens on a Unix socket (the one \
        systemd passes through socket activation, else --socket) for reelctl's start, pause, \
        resume, stop and status, from root, its own user and members of --control-group. \
        Recordings are written as NAME.mp4.part (fragmented, playable if interrupted) and renamed \
        to NAME.mp4 when complete; a .part left by a crash is recovered at start-up. With \
        --outbox-dir, each finished recording is also hard-linked into that directory for an \
        uploader (rclone move), and --keep-free-mb deletes the oldest uploaded ones when space runs \
        low. SIGTERM or \
        SIGINT finish any recording before exiting. Under systemd it speaks the notify and \
        watchdog protocols.

        \(SettingDocs.flagHelp())
        """)

    @OptionGroup var options: DaemonOptions

    @Flag(name: .customLong("check-config"), help: "Check the configuration, print every setting with where it came from, and exit (0 if valid, 1 if not).")
    var checkConfig = false

    @Flag(name: .customLong("list-devices"), help: "Print the V4L2 cameras (formats, sizes, frame rates) and ALSA capture devices, then exit.")
    var listDevices = false

    @Flag(help: "With --list-devices: print JSON (the protocol's devices object).")
    var json = false

    @Flag(name: .customLong("print-config"), help: "Print reeld.toml as generated from the setting table (every key with its documentation and default; config/reeld.toml is this), then exit.")
    var printConfig = false

    func run() throws {
        if printConfig {
            print(SettingDocs.configFile, terminator: "")
            return
        }
        if listDevices {
            let list = listCaptureDevices()
            print(json ? try Wire.text(list) : DevicesText.render(list), terminator: json ? "\n" : "")
            return
        }
        let env = ProcessInfo.processInfo.environment
        let settings: DaemonSettings
        let config: RecorderConfig
        do {
            (settings, config) = try options.load(environment: env, serve: true)
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
        let logger = startProcess(settings, environment: env)

        let notifier = Notifier(environment: env)
        let watchdog = WatchdogEnvironment.timeoutNs(environment: env)
        // The Notifier and watchdog have read these; the on_finish program must not inherit them.
        for v in ["WATCHDOG_USEC", "WATCHDOG_PID", "NOTIFY_SOCKET"] { unsetenv(v) }
        let status = StatusChannel(notifier: notifier)
        let recorder = Recorder(config: config, logger: logger, onStateChange: { status.send($0) })
        let metrics = settings.values.metricsFile.map { MetricsFile(path: $0, logger: logger, errors: recorder.errors) }
        let writeMetrics: @Sendable () -> Void = {
            guard let metrics else { return }
            let outbox = recorder.config.outboxDir.map { (Outbox(path: $0).census(), OutboxCensus.wallClockNs()) }
            metrics.write(PrometheusText.render(recorder.statusInfo(), errors: recorder.errors.snapshot, syncLatencyNs: SyncLatency.last,
                                                 outbox: outbox))
        }
        let supervisor = Supervisor(notifier: notifier, status: status, health: recorder.health, watchdogNs: watchdog,
                                    logger: logger, statusLine: { recorder.statusLine() },
                                    onTick: { recorder.tick(); writeMetrics() }, onStall: { recorder.errors.count(.stall) })
        // Start-up recovery on its own thread: reeld waits for it at most
        // `recoveryWaitBeforeReadyNs`, then serves while it goes on (a long file, a stuck disk).
        let recovered = Promise<Bool>()
        NamedThread.start("reel-recovery") { recorder.recoverPartFiles(); recovered.fulfill(true) }
        if recovered.wait(until: SystemClock.now() + Storage.recoveryWaitBeforeReadyNs) == nil {
            logger.notice("start-up recovery is taking more than \(Storage.recoveryWaitBeforeReadyNs / nanosPerSecond) s; serving meanwhile (it goes on in the background)")
        }

        let policy = PeerPolicy(groupName: settings.values.controlGroup, userName: settings.values.controlUser)
        policy.warnings.forEach { logger.warning("\($0)") }
        let server: ControlServer
        let listening: String
        var limits = ControlLimits.standard
        if let ms = TestHooks.controlIdleMs { limits.idleTimeoutMs = ms }
        do {
            if let passed = try SocketActivation.controlSocket(environment: env) {
                server = ControlServer(listeningFD: passed.fd, handler: recorder, logger: logger,
                                       limits: limits, authorize: policy.authorizer)
                listening = "socket-activated fd \(passed.fd)\(passed.name.map { " (\($0))" } ?? "")"
            } else {
                let path = settings.values.socket
                server = try ControlServer(path: path, handler: recorder, logger: logger,
                                           limits: limits, authorize: policy.authorizer)
                listening = path
            }
        } catch {
            logger.critical("\(error)")
            notifier.send("STATUS=error: \(error)")
            throw ExitCode(1)
        }
        server.attach(events: recorder.events)
        server.attach(live: recorder.liveFeed)
        // Started in this order, stopped in reverse: the recorder first (no start from now on; the
        // recording finished), then the on_finish programs it started, the supervisor, the socket.
        let services = ServiceGroup([
            ServiceGroup.Service("control socket", start: { server.start() }, stop: { _ in server.shutdown() }),
            // No file, no reeld: a fleet alerts on absent(reel_state).
            ServiceGroup.Service("metrics file", stop: { _ in metrics?.remove() }),
            ServiceGroup.Service("supervisor", stop: { _ in supervisor.stop() }),
            ServiceGroup.Service("on_finish programs", stop: { FinishHook.waitForRunning(until: $0, logger: logger) }),
            ServiceGroup.Service("recorder", start: { recorder.startStandby() }, stop: { recorder.shutdown(deadline: $0) }),
        ], logger: logger)
        // Signals were blocked first thing in main (`ProcessSignals`): one that comes at any
        // instant, before or right after READY=1, is acted on here, never lost or left to its
        // default action (SIGHUP's kills).
        services.shutdownOnSignals(announce: { sig in
            logger.notice("received \(sig == SIGTERM ? "SIGTERM" : "SIGINT"), shutting down")
            notifier.send("STOPPING=1")
        }, hangup: {
            notifier.send("RELOADING=1")
            do {
                let (fresh, cfg) = try options.load(environment: env, serve: true)
                recorder.reconfigure(cfg)
                let changed = fresh.keysDiffering(from: settings).filter(\.spec.restartToApply).map(\.rawValue)
                if !changed.isEmpty { logger.warning("SIGHUP: \(changed.joined(separator: ", ")) changed but apply only after a restart ('systemctl restart reeld')") }
                logger.notice("SIGHUP: configuration re-read\(fresh.filePath.map { " from \($0)" } ?? ""); it applies from the next recording")
            } catch {
                logger.error("SIGHUP: configuration not reloaded, keeping the current one: \(error)")
                recorder.errors.count(.reload)
            }
            notifier.send("READY=1")
        })
        try services.start()
        logger.notice("listening on \(listening) for \(policy.summary); recordings go to \(config.outputDir)")
        if let metrics {
            writeMetrics()
            logger.info("metrics written to \(metrics.path) every second")
        }
        notifier.send("READY=1\nSTATUS=idle")
        supervisor.start()  // after READY=1: the first WATCHDOG=1 follows it (its stop is in `services`)
        services.waitUntilStopped()
        Foundation.exit(0)
    }
}

/// What `serve` and `record` set up alike once the settings are read: logging at `log_level`
/// (to the journal when stderr is it), SIGPIPE ignored, FFmpeg's and x264's messages routed to
/// the log, then where the settings came from and the warnings about them (and `warnings`).
func startProcess(_ settings: DaemonSettings, environment env: [String: String], warnings more: [String] = []) -> Logger {
    let level = Logger.Level(settings.values.logLevel)
    let journal = JournalStream.isStderr(environment: env)
    LoggingSystem.bootstrap { _ in ReelLogHandler(level: level, journal: journal) }
    let logger = Logger(label: "reeld")
    signal(SIGPIPE, SIG_IGN)
    // A fixed mmap threshold (glibc's default value): every block of 128 KiB or more (x264's
    // frames, large packets) is mapped on its own and returned on free. Left dynamic, glibc
    // raises the threshold at the first such free (a take's fresh x264), serves those blocks
    // from the heap after that, and the heap only grows: +5.1 MiB of RSS over an hour with a
    // 5 s pause every 30 s, against +1.0 MiB with this (docs/PERFORMANCE.md).
    Sys.fixMmapThreshold(bytes: 128 * 1024)
    FFmpegLog.warningsOnly()
    LibraryLogging.route(to: logger)
    if let f = settings.filePath { logger.info("configuration read from \(f)") }
    (settings.warnings + more).forEach { logger.warning("\($0)") }
    return logger
}

/// The settings both subcommands share: sources, encoders, storage, control; with the
/// precedence flags > REEL_* environment > config file > defaults.
struct DaemonOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Config file (default: $REEL_CONFIG, else /etc/reel/reeld.toml if it exists).", valueName: "path"))
    var config: String?

    /// The table's settings as flags (`--crf 20`, `--crf=20`; see `SettingFlags`): ArgumentParser
    /// hands over what it does not know, and `validate` refuses anything that is not a setting.
    @Argument(parsing: .allUnrecognized, help: .private)
    var settingArguments: [String] = []

    @Option(name: .customLong("test-audio-skew-ppm"), help: "Skew of the synthetic audio clock against CLOCK_MONOTONIC, in ppm.")
    var testAudioSkewPpm: Int64 = 0

    @Flag(help: "Deliver the synthetic sources as fast as the pipeline takes them (same virtual timestamps).")
    var unpaced = false

    @Flag(inversion: .prefixedNo, help: "Resample the audio so its clock follows CLOCK_MONOTONIC (keeps A/V in sync on a drifting sound card).")
    var driftLock = true

    mutating func validate() throws { _ = try flagSettings }

    /// The flags given on the command line, as settings (they beat environment and file); a
    /// mistake in them is a usage error.
    var flagSettings: [SettingKey: SettingValue] {
        get throws {
            do { return try SettingFlags.parse(settingArguments) } catch { throw ValidationError(error.description) }
        }
    }

    /// Settings and the recorder configuration they make; errors name the file and line,
    /// variable or flag, and the key. `serve`: the daemon's settings are checked against the
    /// file system too (the outbox: `outboxConfig`).
    func load(environment: [String: String], serve: Bool = false) throws -> (DaemonSettings, RecorderConfig) {
        let s = try DaemonSettings.resolve(configPath: config, environment: environment, flags: try flagSettings)
        var c = try makeConfig(s)
        if serve { try outboxConfig(s, &c) }
        return (s, c)
    }

    /// `outbox_dir` and `keep_free_mb` (serve only), checked against the file system
    /// (`DaemonSettings.outbox`).
    func outboxConfig(_ settings: DaemonSettings, _ config: inout RecorderConfig) throws(ConfigError) {
        (config.outboxDir, config.keepFreeBytes) = try settings.outbox(outputDir: config.outputDir)
    }

    /// The recorder configuration of checked settings: what the table checks is not checked
    /// again here, only what combines keys or needs a file opened. An error names the key whose
    /// value it is about (`DaemonSettings.error`: where it was set).
    func makeConfig(_ settings: DaemonSettings) throws(ConfigError) -> RecorderConfig {
        let s = settings.values
        let (w, h) = (s.size.width, s.size.height), rate = s.fps, cpf = s.pixelFormat
        guard abs(testAudioSkewPpm) < 100_000 else { throw ConfigError("invalid --test-audio-skew-ppm \(testAudioSkewPpm): use -99999 to 99999") }
        let vf = VideoFormat(width: w, height: h, fps: rate, pixelFormat: cpf.delivered)
        let af = AudioFormat(sampleRate: s.sampleRate, channels: s.channels)
        let v: RecorderConfig.Video
        switch s.video {
        case .test:
            guard cpf != .mjpeg else { throw settings.error(.pixelFormat, "--pixel-format mjpeg needs a camera: the test source renders yuyv, uyvy, nv12 or yuv420") }
            v = .test(vf)
        case .none: v = .none
        case let .y4m(path):
            guard case let .video(f) = try probe(path, video: true, settings).content else { throw settings.error(.video, "\(path) holds no video") }
            v = .y4m(path: path, f)
        case let .camera(path):
            guard !unpaced else { throw settings.error(.video, "--unpaced applies to the synthetic sources and files only, not to camera \(path)") }
            v = .v4l2(device: path, CameraRequest(width: w, height: h, fps: rate, pixelFormat: cpf))
        }
        let a: RecorderConfig.Audio
        switch s.audio {
        case .test: a = .test(af, skewPpm: testAudioSkewPpm)
        case .none: a = .none
        case let .wav(path):
            guard case let .audio(f) = try probe(path, video: false, settings).content else { throw settings.error(.audio, "\(path) holds no audio") }
            a = .wav(path: path, f)
        case let .alsa(device):
            guard !unpaced else { throw settings.error(.audio, "--unpaced applies to the synthetic sources and files only, not to alsa:\(device)") }
            a = .alsa(device: device, af)
        }
        if case .none = v, case .none = a { throw settings.error(.video, "--video none and --audio none: nothing to record") }
        var h264 = H264Settings()
        h264.preset = s.preset; h264.tune = s.tune; h264.crf = s.crf
        h264.bitrateKbps = s.bitrate == 0 ? nil : s.bitrate
        h264.keyintSeconds = s.keyint; h264.profile = s.profile
        var aac = AACSettings()
        aac.bitrate = s.audioBitrate
        let dir = s.outputDir.hasPrefix("/") ? s.outputDir : FileManager.default.currentDirectoryPath + "/" + s.outputDir
        var config = RecorderConfig(outputDir: dir, video: v, audio: a, paced: !unpaced, h264: h264, aac: aac, driftLock: driftLock)
        config.minFreeBytes = Int64(s.minFreeMB) * 1_000_000
        config.onFinish = s.onFinish
        config.onFinishTimeoutNs = Int64(s.onFinishTimeout) * nanosPerSecond
        config.fsync = s.fsync
        config.maxDuration = s.maxDuration
        config.cameraControls = settings.cameraControls
        config.standby = s.standby
        config.preRoll = s.preRoll
        try checkPreRoll(settings, config)
        config.previewMaxWidth = s.previewMaxWidth
        config.previewMaxFps = s.previewMaxFps
        return config
    }

    /// A pre-roll needs warm sources, and memory within pre_roll_max_mb (`PreRoll`).
    private func checkPreRoll(_ settings: DaemonSettings, _ config: RecorderConfig) throws(ConfigError) {
        let p = PreRoll(config.preRoll)
        if let problem = p.standbyProblem(standby: config.standby, canBeWarm: LiveSources.canBeWarm(config)) {
            throw settings.error(.preRoll, problem)
        }
        let video = config.videoFormat.map { (frameBytes: $0.pixelFormat.frameBytes(width: $0.width, height: $0.height), fps: $0.fps) }
        if let problem = p.memoryProblem(bytes: p.bytes(video: video, audio: config.audioFormat), limitMB: settings.values.preRollMaxMB) {
            throw settings.error(.preRoll, problem)
        }
    }

    /// Opens a source file once to learn its format; a bad file is a startup error naming it.
    private func probe(_ path: String, video: Bool, _ settings: DaemonSettings) throws(ConfigError) -> MediaFileReader {
        do { return try MediaFileReader(path: path, video: video) }
        catch { throw settings.error(video ? .video : .audio, "\(error)") }
    }
}

extension Logger.Level {
    /// swift-log's level of the same name.
    init(_ level: LogLevel) {
        switch level {
        case .trace: self = .trace
        case .debug: self = .debug
        case .info: self = .info
        case .notice: self = .notice
        case .warning: self = .warning
        case .error: self = .error
        case .critical: self = .critical
        }
    }
}

// Before anything else, before any thread exists: see ProcessSignals.
ProcessSignals.block()
Reeld.main()
