import ArgumentParser
import Foundation
import Logging
import ReelConfig
import ReelCore
import ReelMedia
import ReelPipeline
import ReelService
import ReelStorage

/// `reeld`: the daemon (`serve`, the default) or a one-shot recording (`record`).
struct Reeld: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reeld",
        abstract: "Reel recorder daemon: camera + microphone to one continuous MP4, driven by reelctl.",
        discussion: "Both subcommands take these settings as flags.\n\n" + SettingDocs.flagHelp(),
        subcommands: [Serve.self, Record.self],
        defaultSubcommand: Serve.self)
}

/// `reeld record`: the same pipeline without the socket, for scripts, benchmarks and long runs.
struct Record: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record once into --output and exit: no socket; pauses from a fixed schedule in source time.",
        usage: "reeld record [--<setting> <value> ...] [<options>] --output <path>",
        discussion: """
        Sources, encoders and the config file work as for 'reeld serve'. The recording stops after \
        --duration seconds of source time, at the end of a file source, or on SIGINT/SIGTERM (the \
        file is finished, not lost). With --pause-every A --pause-for B it pauses at A, 2A, ... \
        seconds of source time, for B seconds each. Exit status 0 when the file is complete.

        \(SettingDocs.flagHelp())
        """)

    @OptionGroup var options: DaemonOptions

    @Option(help: ArgumentHelp("The MP4 to write (written as PATH.part, renamed when complete).", valueName: "path"))
    var output: String

    @Option(help: "Stop after this many seconds of source time, e.g. 3600 or 2.5 (required for the test source and devices).")
    var duration: String?

    @Option(name: .customLong("pause-every"), help: "Pause every this many seconds of source time.")
    var pauseEvery: String?

    @Option(name: .customLong("pause-for"), help: "Length of each scheduled pause, in seconds (with --pause-every).")
    var pauseFor: String?

    /// Decimal seconds, parsed exactly into integer ns.
    private func nanos(_ flag: String, _ text: String?) throws -> Nanos? {
        guard let text else { return nil }
        guard let ns = parseSeconds(text), ns > 0 else { throw ValidationError("invalid \(flag) '\(text)': use positive seconds, e.g. 30 or 2.5") }
        return ns
    }

    mutating func validate() throws {
        _ = try nanos("--duration", duration)
        let every = try nanos("--pause-every", pauseEvery), length = try nanos("--pause-for", pauseFor)
        if let every {
            guard let length, length < every else {
                throw ValidationError("--pause-every needs --pause-for shorter than its period")
            }
        } else if length != nil { throw ValidationError("--pause-for needs --pause-every") }
    }

    func run() throws {
        let env = ProcessInfo.processInfo.environment
        let (settings, config): (DaemonSettings, RecorderConfig)
        do { (settings, config) = try options.load(environment: env) } catch {
            FileHandle.standardError.write(Data("reeld: \(error)\n".utf8))
            throw ExitCode(2)
        }
        let (serveOnlyErrors, serveOnlyWarnings) = settings.serveOnlyProblems
        if !serveOnlyErrors.isEmpty {
            FileHandle.standardError.write(Data(serveOnlyErrors.map { "reeld: record: \($0)\n" }.joined().utf8))
            throw ExitCode(2)
        }
        let isFile: Bool
        switch config.video { case .y4m: isFile = true; case .none: if case .wav = config.audio { isFile = true } else { isFile = false }; default: isFile = false }
        if duration == nil && !isFile {
            FileHandle.standardError.write(Data("reeld: record: give --duration (only file sources end by themselves)\n".utf8))
            throw ExitCode(2)
        }
        let logger = startProcess(settings, environment: env, warnings: serveOnlyWarnings)
        // One service: the recording, which a signal finishes early (`record` then returns).
        let services = ServiceGroup([ServiceGroup.Service("recording", stop: { _ in OneShot.stopEarly() })], logger: logger)
        // SIGHUP too: a closed terminal finishes the recording instead of killing it (its default).
        services.shutdownOnSignals(announce: { sig in
            logger.notice("received \(sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGHUP"): finishing the recording")
        })
        try services.start()
        let output = self.output.hasPrefix("/") ? self.output : FileManager.default.currentDirectoryPath + "/" + self.output
        do {
            let (path, snap) = try withExtendedLifetime(services) {
                try OneShot.record(config: config, output: output, duration: nanos("--duration", duration),
                                   pauseEvery: nanos("--pause-every", pauseEvery),
                                   pauseFor: nanos("--pause-for", pauseFor) ?? 0, logger: logger)
            }
            logger.notice("recorded \(path): \(snap.segmentDurations.count) segment(s), \(formatDuration(snap.recordedNs)), \(snap.frames) frames, \(snap.droppedFrames) dropped, \(snap.audioSamples) audio samples",
                          metadata: RecordingLog.fields(.finished, file: path, part: path + ".part", durationNs: snap.recordedNs,
                                                        more: ["REEL_SEGMENTS": "\(snap.segmentDurations.count)", "REEL_FRAMES": "\(snap.frames)",
                                                               "REEL_DROPPED_FRAMES": "\(snap.droppedFrames)"]))
            print(path)
        } catch {
            logger.error("\(error)")
            throw ExitCode(1)
        }
    }
}
