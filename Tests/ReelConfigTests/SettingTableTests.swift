import Foundation
import ReelCore
@testable import ReelConfig
import XCTest

/// The setting table (`SettingKey.spec`) is the one declaration of each setting: the shipped
/// config file, `--help` and the checks all come from it.
final class SettingTableTests: XCTestCase {
    private var repo: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    func testShippedConfigFileIsWhatTheTableGenerates() throws {
        let path = repo.appendingPathComponent("config/reeld.toml").path
        let shipped = try String(contentsOfFile: path, encoding: .utf8)
        let generated = SettingDocs.configFile
        guard shipped != generated else { return }
        let a = shipped.split(separator: "\n", omittingEmptySubsequences: false)
        let b = generated.split(separator: "\n", omittingEmptySubsequences: false)
        let n = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
        XCTFail("""
            config/reeld.toml differs from the setting table from line \(n + 1):
              shipped:   \(n < a.count ? String(a[n]) : "(end of file)")
              generated: \(n < b.count ? String(b[n]) : "(end of file)")
            regenerate it with `make config/reeld.toml` (reeld --print-config > config/reeld.toml)
            """)
    }

    func testTheGeneratedFileSetsEveryKeyToItsDefaultUnderItsComment() throws {
        let path = NSTemporaryDirectory() + "reel-generated-\(UUID().uuidString).toml"
        try SettingDocs.configFile.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let s = try DaemonSettings.resolve(configPath: path, environment: [:], flags: [:])
        let lines = SettingDocs.configFile.split(separator: "\n", omittingEmptySubsequences: false)
        for k in SettingKey.allCases {
            guard case let .file(_, line?) = s.origin(of: k) else { return XCTFail("\(k.rawValue) is not set in the generated file") }
            XCTAssertEqual(s.written(k), k.defaultValue, k.rawValue)
            let comment = lines[..<(line - 1)].reversed().prefix { $0.hasPrefix("#") && !$0.hasPrefix("# ---") }.reversed()
                .map { $0.dropFirst(2) }.joined(separator: "\n")
            XCTAssertEqual(comment, k.spec.doc, "the comment above \(k.rawValue)")
        }
        XCTAssertEqual(s.values, Settings.defaults)
    }

    func testEveryDefaultPassesItsOwnCheckAndParses() {
        for k in SettingKey.allCases { XCTAssertNil(k.problem(k.defaultValue), "\(k.rawValue)'s default \(k.defaultValue)") }
        let s = DaemonSettings().values
        XCTAssertEqual(s, Settings.defaults)
        XCTAssertEqual(s.size, VideoSize(width: 640, height: 360))
        XCTAssertEqual(s.fps, Rational(30, 1))
        XCTAssertEqual(s.pixelFormat, .yuyv)
        XCTAssertEqual(s.video, .camera(device: "/dev/video0"))
        XCTAssertEqual(s.audio, .alsa(device: "default"))
        XCTAssertEqual(s.fsync, .fragment)
        XCTAssertEqual(s.logLevel, .info)
        XCTAssertEqual(s.controlGroup, "reel")
        XCTAssertNil(s.controlUser)
        XCTAssertNil(s.maxDuration)
        XCTAssertNil(s.metricsFile)
        XCTAssertEqual(s.crf, 23)
        XCTAssertEqual(s.standby, false)
    }

    /// Each field of `Settings` is the field of exactly one key, so every field is set from the
    /// table (none keeps the placeholder `Settings.defaults` starts from), and no key's value
    /// lands in another's field.
    func testEachFieldOfTheTypedSettingsIsOneKeys() {
        let fields = Mirror(reflecting: Settings.defaults).children.compactMap(\.label)
        XCTAssertEqual(fields.count, SettingKey.allCases.count, "fields: \(fields)")
        let paths = SettingKey.allCases.map { $0.spec.field.keyPath as AnyKeyPath }
        XCTAssertEqual(Set(paths).count, paths.count, "two keys write the same field")
        // Named as their keys' cases, so `settings.values.crf` is `crf`.
        XCTAssertEqual(Set(fields), Set(SettingKey.allCases.map { "\($0)" }))
        // A value set for a key is read back from its own field (each kind once).
        let probes: [(SettingKey, SettingValue, AnyHashable)] = [
            (.crf, .int(31), 31), (.standby, .bool(true), true), (.onFinish, .strings(["/bin/x"]), ["/bin/x"]),
            (.preset, .string("slow"), "slow"),
            (.fps, .string("25"), Rational(25, 1)), (.size, .string("320x180"), VideoSize(width: 320, height: 180)),
        ]
        for (key, value, want) in probes {
            var s = Settings.defaults
            XCTAssertNil(key.spec.field.write(value, &s), key.rawValue)
            XCTAssertEqual(s[keyPath: key.spec.field.keyPath as AnyKeyPath] as? AnyHashable, want, key.rawValue)
        }
    }

    /// What the docs say a key takes is what its check takes: the range of an integer key, the
    /// values of a one-of key, in its comment and its --help entry.
    func testDocsAndHelpNameEachKeysRangeAndValues() {
        let help = SettingDocs.flagHelp()
        for k in SettingKey.allCases {
            let spec = k.spec
            var must: [String] = []
            switch spec.rule {
            case let .range(r, _): must = ["\(r.lowerBound) to \(r.upperBound)"]
            case let .oneOf(values): must = values
            case .boolean: must = ["true", "false"]
            case .text, .program: break
            }
            for text in must {
                XCTAssertTrue(spec.doc.contains(text), "\(k.rawValue)'s comment lacks \(text)")
                XCTAssertTrue(spec.help.contains(text), "\(k.rawValue)'s help lacks \(text)")
            }
            for placeholder in ["{range}", "{values}"] {
                XCTAssertFalse(spec.doc.contains(placeholder) || spec.help.contains(placeholder), "\(k.rawValue): \(placeholder) not expanded")
            }
            // Its entry in --help: the flag, the default, the variable and the file key.
            let entry = help.components(separatedBy: "\n  --").first { $0.hasPrefix(k.flag.dropFirst(2) + " ") }
            guard let entry else { XCTFail("--help lacks \(k.flag)"); continue }
            let flat = entry.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            XCTAssertTrue(flat.contains("Default: \(SettingDocs.shown(k.defaultValue))."), "\(k.flag): \(flat)")
            XCTAssertTrue(flat.contains("\(k.environmentVariable), \(k.rawValue)."), "\(k.flag): \(flat)")
            XCTAssertTrue(flat.contains(spec.help.split(whereSeparator: \.isWhitespace).joined(separator: " ")), "\(k.flag): \(flat)")
        }
        XCTAssertLessThanOrEqual(help.split(separator: "\n").map(\.count).max() ?? 0, 79)
    }

    /// The keys SIGHUP cannot change, as the file's preamble lists them.
    func testThePreambleListsTheKeysThatNeedARestart() {
        XCTAssertTrue(SettingDocs.configFile.contains("# socket, control_group, control_user, log_level and metrics_file apply only after `systemctl restart reeld`."))
    }
}
