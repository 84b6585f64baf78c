import Foundation
import ReelControl
import ReelCore
@testable import ReelConfig
import XCTest

final class ConfigTests: XCTestCase {
    private func file(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "reel-config-\(UUID().uuidString).toml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    private func error(_ path: String?, env: [String: String] = [:], flags: [SettingKey: SettingValue] = [:]) -> String? {
        do { _ = try DaemonSettings.resolve(configPath: path, environment: env, flags: flags); return nil }
        catch { return error.description }
    }

    func testPrecedenceFlagOverEnvironmentOverFileOverDefault() throws {
        let path = try file("crf = 20\nkeyint = 4\npreset = \"fast\"\n")
        let s = try DaemonSettings.resolve(configPath: path, environment: ["REEL_KEYINT": "5", "REEL_PRESET": "slow"],
                                           flags: [.preset: .string("medium")])
        XCTAssertEqual(s.values.crf, 20)
        XCTAssertEqual(s.origin(of: .crf), .file(path: path, line: 1))
        XCTAssertEqual(s.values.keyint, 5)
        XCTAssertEqual(s.origin(of: .keyint), .environment("REEL_KEYINT"))
        XCTAssertEqual(s.values.preset, "medium")
        XCTAssertEqual(s.origin(of: .preset), .flag("--preset"))
        XCTAssertEqual(s.values.sampleRate, 48000)
        XCTAssertEqual(s.origin(of: .sampleRate), .defaultValue)
    }

    /// `reeld record` and the daemon's own settings: a flag is an error naming it, the
    /// environment a warning naming the variable, the shared file nothing; the encoder's and the
    /// sources' settings are the recording's and never named.
    func testServeOnlySettingsGivenToAOneShotRecording() throws {
        let path = try file("on_finish = [\"/bin/true\"]\nstandby = true\ncrf = 20\n")
        let s = try DaemonSettings.resolve(configPath: path, environment: ["REEL_SOCKET": "/tmp/r.sock", "REEL_KEYINT": "5"],
                                           flags: [.metricsFile: .string("/tmp/reel.prom"), .crf: .int(22), .maxDuration: .string("6")])
        let (errors, warnings) = s.serveOnlyProblems
        XCTAssertEqual(errors, ["--metrics-file is a setting of the daemon ('reeld serve'); 'reeld record' does not use it: remove it"])
        XCTAssertEqual(warnings, ["environment variable REEL_SOCKET is a setting of the daemon ('reeld serve'); 'reeld record' ignores it"])
        let plain = try DaemonSettings.resolve(configPath: path, environment: [:], flags: [:]).serveOnlyProblems
        XCTAssertTrue(plain.errors.isEmpty && plain.warnings.isEmpty, "the config file is the daemon's too: \(plain)")
        // What a recording uses is never serve-only.
        for key: SettingKey in [.video, .audio, .crf, .preset, .fsync, .maxDuration, .logLevel] { XCTAssertFalse(key.spec.serveOnly, key.rawValue) }
    }

    /// Each value is kept in the type its check reads it into, from whichever layer set it; what
    /// `--check-config` reports is what was written.
    func testValuesAreKeptTypedFromEveryLayer() throws {
        let path = try file("""
            fps = "30000/1001"
            size = "1280x720"
            video = "v4l2:/dev/video2"
            audio = "wav:/tmp/a.wav"
            pixel_format = "i420"
            max_duration = "2.5"
            tune = ""
            control_user = ""
            fsync = "none"
            log_level = "debug"
            on_finish = ["/bin/echo", "x y"]
            """)
        let s = try DaemonSettings.resolve(configPath: path, environment: ["REEL_STANDBY": "yes", "REEL_CRF": "30"],
                                           flags: [.bitrate: .int(900), .metricsFile: .string("/tmp/r.prom")])
        let v = s.values
        XCTAssertEqual(v.fps, Rational(30000, 1001))
        XCTAssertEqual(v.size, VideoSize(width: 1280, height: 720))
        XCTAssertEqual(v.video, .camera(device: "/dev/video2"))
        XCTAssertEqual(v.audio, .wav(path: "/tmp/a.wav"))
        XCTAssertEqual(v.pixelFormat, .yuv420)
        XCTAssertEqual(v.maxDuration, 2_500_000_000)
        XCTAssertNil(v.tune)
        XCTAssertNil(v.controlUser)
        XCTAssertEqual(v.controlGroup, "reel")
        XCTAssertEqual(v.fsync, .none)
        XCTAssertEqual(v.logLevel, .debug)
        XCTAssertEqual(v.onFinish, ["/bin/echo", "x y"])
        XCTAssertEqual(v.standby, true)
        XCTAssertEqual(v.crf, 30)
        XCTAssertEqual(v.bitrate, 900)
        XCTAssertEqual(v.metricsFile, "/tmp/r.prom")
        XCTAssertEqual(s.written(.pixelFormat), .string("i420"))
        XCTAssertTrue(s.report.contains("\npixel_format = \"i420\"  # \(path):5\n"), s.report)
        // 0 is no cap; an integer is seconds.
        XCTAssertNil(try DaemonSettings.resolve(configPath: "/dev/null", environment: [:], flags: [.maxDuration: .string("0")]).values.maxDuration)
        let capped = try file("max_duration = 90\n")
        XCTAssertEqual(try DaemonSettings.resolve(configPath: capped, environment: [:], flags: [:]).values.maxDuration, 90_000_000_000)
    }

    /// A value of the wrong kind is refused naming where it came from, never read as 0 or as a
    /// one-element list (a caller in-process can hand the resolver any `SettingValue`).
    func testAValueOfTheWrongKindIsAnError() {
        XCTAssertEqual(error(nil, flags: [.crf: .string("7")]), "invalid --crf: expected an integer")
        XCTAssertEqual(error(nil, flags: [.standby: .string("true")]), "invalid --standby: expected true or false")
        XCTAssertEqual(error(nil, flags: [.onFinish: .string("/bin/true")]), "invalid --on-finish: expected an array of strings")
        XCTAssertEqual(error(nil, flags: [.video: .int(0)]), "invalid --video: expected a string")
        XCTAssertEqual(error(nil, flags: [.fps: .bool(true)]), "invalid --fps: expected an integer or a string")
    }

    /// What reeld finds wrong past the table (a combination of keys, a source file) names where
    /// the key was set, through the error's origin, not its text.
    func testAnErrorAboutAKeyNamesWhereItWasSet() throws {
        let path = try file("\nvideo = \"none\"\n")
        let fromFile = try DaemonSettings.resolve(configPath: path, environment: [:], flags: [:])
        let e1 = fromFile.error(.video, "nothing to record")
        XCTAssertEqual(e1.description, "\(path):2: key 'video': nothing to record")
        XCTAssertEqual(e1.origin, .file(path: path, line: 2))
        let fromEnvironment = try DaemonSettings.resolve(configPath: path, environment: ["REEL_VIDEO": "test"], flags: [:])
        XCTAssertEqual(fromEnvironment.error(.video, "x").description, "environment REEL_VIDEO: key 'video': x")
        let fromFlag = try DaemonSettings.resolve(configPath: path, environment: [:], flags: [.video: .string("test")])
        let e3 = fromFlag.error(.video, "--video test: x")
        XCTAssertEqual(e3.description, "--video test: x")
        XCTAssertEqual(e3.origin, .flag("--video"))
        XCTAssertEqual(DaemonSettings().error(.audio, "y").origin, .defaultValue)
    }

    /// SIGHUP compares typed values: the same setting written another way has not changed.
    func testKeysDifferingCompareTypedValues() throws {
        let a = try DaemonSettings.resolve(configPath: "/dev/null", environment: [:], flags: [.socket: .string("/run/a.sock"), .pixelFormat: .string("i420")])
        let b = try DaemonSettings.resolve(configPath: "/dev/null", environment: [:],
                                           flags: [.socket: .string("/run/b.sock"), .pixelFormat: .string("yuv420"), .crf: .int(23)])
        XCTAssertEqual(b.keysDiffering(from: a), [.socket])
        XCTAssertEqual(a.keysDiffering(from: a), [])
    }

    func testUnknownKeyNamesFileLineAndKey() throws {
        let path = try file("# comment\n\ncrf = 20\nmin_free = 3\n")
        XCTAssertEqual(error(path), "\(path):4: key 'min_free': unknown key (did you mean 'min_free_mb'?); the keys are documented in /etc/reel/reeld.toml")
    }

    func testBadValueAndWrongTypeNameFileLineAndKey() throws {
        let p1 = try file("channels = 6\n")
        XCTAssertEqual(error(p1), "\(p1):1: key 'channels': 6 is out of range (use 1 to 5)")
        let p2 = try file("\nsize = 640\n")
        XCTAssertEqual(error(p2), "\(p2):2: key 'size': expected a string (in quotes), found an integer")
        let p3 = try file("on_finish = [\"upload.sh\"]\n")
        XCTAssertTrue(error(p3)?.hasPrefix("\(p3):1: key 'on_finish': the program 'upload.sh' must be an absolute path") ?? false)
        let p4 = try file("fps = \"0/1\"\n")
        XCTAssertTrue(error(p4)?.hasPrefix("\(p4):1: key 'fps':") ?? false)
    }

    func testSyntaxErrorNamesTheLine() throws {
        let path = try file("crf = 20\nsize = \"640x360\n")
        XCTAssertTrue(error(path)?.hasPrefix("\(path):2: ") ?? false, error(path) ?? "no error")
    }

    func testBadEnvironmentAndFlagValuesNameTheirSource() {
        XCTAssertEqual(error(nil, env: ["REEL_CONFIG": "", "REEL_CRF": "high"]),
                       "invalid environment variable REEL_CRF (key 'crf'): 'high' is not an integer")
        XCTAssertEqual(error(nil, flags: [.logLevel: .string("loud")]),
                       "invalid --log-level: 'loud' is not one of trace, debug, info, notice, warning, error, critical")
    }

    func testMissingExplicitFileIsAnError() {
        XCTAssertTrue(error("/nonexistent/reeld.toml")?.hasPrefix("cannot read config file /nonexistent/reeld.toml") ?? false)
    }

    func testShippedConfigIsValidSetsAndDocumentsEveryKey() throws {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let path = repo.appendingPathComponent("config/reeld.toml").path
        let s = try DaemonSettings.resolve(configPath: path, environment: [:], flags: [:])
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        for k in SettingKey.allCases {
            guard case let .file(_, line?) = s.origin(of: k) else { return XCTFail("\(k.rawValue) is not set in config/reeld.toml") }
            XCTAssertTrue(lines[line - 2].hasPrefix("#"), "\(k.rawValue) has no comment above it")
            XCTAssertEqual(s.written(k), k.defaultValue, "config/reeld.toml's \(k.rawValue) differs from the built-in default")
        }
        XCTAssertEqual(s.values, Settings.defaults)
    }

    // MARK: [camera.controls]

    func testCameraControlsTableIsReadInFileOrderWithLines() throws {
        let path = try file("""
        video = "/dev/video0"
        [camera.controls]
        exposure_time_absolute = 250
        white_balance_automatic = false
        power_line_frequency = "50 Hz"

        """)
        let s = try DaemonSettings.resolve(configPath: path, environment: [:], flags: [:])
        XCTAssertEqual(s.cameraControls, [
            CameraControlAssignment(name: "exposure_time_absolute", input: .int(250), origin: "\(path):3: [camera.controls] exposure_time_absolute"),
            CameraControlAssignment(name: "white_balance_automatic", input: .bool(false), origin: "\(path):4: [camera.controls] white_balance_automatic"),
            CameraControlAssignment(name: "power_line_frequency", input: .text("50 Hz"), origin: "\(path):5: [camera.controls] power_line_frequency"),
        ])
        XCTAssertEqual(s.warnings, [])
        XCTAssertTrue(s.report.hasSuffix("[camera.controls]\nexposure_time_absolute = 250  # \(path):3\nwhite_balance_automatic = false  # \(path):4\npower_line_frequency = \"50 Hz\"  # \(path):5"), s.report)
        // The dotted form at the root means the same.
        let dotted = try file("camera.controls.brightness = 140\n")
        XCTAssertEqual(try DaemonSettings.resolve(configPath: dotted, environment: [:], flags: [.video: .string("/dev/video2")]).cameraControls.map(\.input), [.int(140)])
    }

    func testCameraControlsErrorsNameFileLineKeyAndFix() throws {
        let p1 = try file("[camera.controls]\nBrightness = 1\n")
        XCTAssertEqual(error(p1), "\(p1):2: key 'camera.controls.Brightness': 'Brightness' is not a control name as 'reelctl controls' (and v4l2-ctl) spell them: lowercase letters, digits and single '_' (did you mean 'brightness'?)")
        let p2 = try file("[camera.controls]\nbrightness = 1.5\n")
        XCTAssertEqual(error(p2), "\(p2):2: key 'camera.controls.brightness': expected an integer, true/false or a string (a menu entry), found a floating-point number (controls take whole numbers, e.g. 2)")
        let p3 = try file("[camera.controls]\nbrightness = 1\ncontrast = 2\nbrightness = 3\n")
        XCTAssertEqual(error(p3), "\(p3):4: key 'camera.controls.brightness': set twice, first on line 2 (keep one)")
        let p4 = try file("crf = 20\n[camera]\nexposure = 3\n")
        XCTAssertEqual(error(p4), "\(p4):3: key 'camera.exposure': not read: under [camera] only [camera.controls] is (write camera controls under a [camera.controls] header, one NAME = VALUE per line, e.g. brightness = 140)")
        let p5 = try file("camera = { controls = { brightness = 1 } }\n")
        XCTAssertEqual(error(p5), "\(p5):1: key 'camera': expected a [camera.controls] table, found a table (write camera controls under a [camera.controls] header, one NAME = VALUE per line, e.g. brightness = 140)")
        let p6 = try file("[camera.controls]\nbrightness = [1]\n")
        XCTAssertEqual(error(p6)?.hasPrefix("\(p6):2: key 'camera.controls.brightness': expected an integer, true/false or a string (a menu entry), found an array"), true)
        // Other tables are still refused as before.
        let p7 = try file("[encoder]\npreset = \"fast\"\n")
        XCTAssertEqual(error(p7)?.hasPrefix("\(p7):1: key 'encoder': reeld.toml has no tables"), true)
    }

    func testCameraControlsWithoutACameraAreIgnoredWithAWarning() throws {
        let path = try file("video = \"test\"\n[camera.controls]\nbrightness = 1\n")
        let s = try DaemonSettings.resolve(configPath: path, environment: [:], flags: [:])
        XCTAssertEqual(s.warnings, ["[camera.controls] in \(path) is ignored: the video source is 'test', not a V4L2 camera"])
    }
}

/// `pre_roll` and `pre_roll_max_mb` (issue 25): seconds to integer ns from every layer, refused
/// when malformed, daemon-only. (The refusals that combine keys, standby and memory, are
/// `PreRoll`'s, tested in ReelCoreTests, and reeld's, in Tests/e2e/test_preroll.py.)
final class PreRollSettingTests: XCTestCase {
    func testPreRollIsReadAsIntegerNanosecondsFromEveryLayer() throws {
        let path = NSTemporaryDirectory() + "preroll-\(getpid()).toml"
        try "pre_roll = \"1.5\"\npre_roll_max_mb = 64\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        let f = try DaemonSettings.resolve(configPath: path, environment: [:], flags: [:])
        XCTAssertEqual(f.values.preRoll, 1_500_000_000)
        XCTAssertEqual(f.values.preRollMaxMB, 64)
        let e = try DaemonSettings.resolve(configPath: path, environment: ["REEL_PRE_ROLL": "0.125"], flags: [:])
        XCTAssertEqual(e.values.preRoll, 125_000_000)
        let g = try DaemonSettings.resolve(configPath: path, environment: ["REEL_PRE_ROLL": "0.125"], flags: [.preRoll: .string("3")])
        XCTAssertEqual(g.values.preRoll, 3_000_000_000)
        XCTAssertEqual(g.origin(of: .preRoll), .flag("--pre-roll"))
        XCTAssertEqual(Settings.defaults.preRoll, 0)
        XCTAssertEqual(Settings.defaults.preRollMaxMB, 256)
        XCTAssertTrue(SettingKey.preRoll.spec.serveOnly && SettingKey.preRollMaxMB.spec.serveOnly)
    }

    func testMalformedPreRollNamesTheKeyAndTheForm() {
        XCTAssertThrowsError(try DaemonSettings.resolve(configPath: "/dev/null", environment: [:], flags: [.preRoll: .string("1.2345")])) {
            XCTAssertTrue("\($0)".contains("'1.2345' is not a number of seconds from 0 to 300 with at most 3 decimals"), "\($0)")
        }
        XCTAssertThrowsError(try DaemonSettings.resolve(configPath: "/dev/null", environment: ["REEL_PRE_ROLL_MAX_MB": "0"], flags: [:])) {
            XCTAssertTrue("\($0)".contains("REEL_PRE_ROLL_MAX_MB"), "\($0)")
        }
    }
}
