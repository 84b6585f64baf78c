import Foundation
import ReelCore
@testable import ReelConfig
import XCTest
import ReelTestSupport

/// The hostile-config sweep (issue 6): every key, with every wrong TOML type, values just outside
/// each bound and far beyond, and malformed strings, through the file, the environment and the
/// flags; plus unknown, duplicated and misplaced keys, bytes that are not text, and garbage.
/// Each must be a ConfigError naming the key (and, from the file, file:line), never a crash,
/// never silently accepted; and the valid neighbours must still be accepted.
final class HostileConfigTests: XCTestCase {
    private var dir = ""
    /// Refusals checked by this test, printed at its end (the figure in docs/RELIABILITY.md).
    private var refusals = 0

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "reel-hostile-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: dir)
        if refusals > 0 { print("\(name): \(refusals) hostile inputs refused with the expected message") }
    }

    private var fileCount = 0
    private func file(_ bytes: [UInt8]) -> String {
        fileCount += 1
        let path = "\(dir)/\(fileCount).toml"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)), path)
        return path
    }
    private func file(_ text: String) -> String { file(Array(text.utf8)) }

    /// The error resolving these inputs gives, or nil if they are accepted.
    private func error(_ path: String?, env: [String: String] = [:], flags: [SettingKey: SettingValue] = [:]) -> String? {
        do { _ = try DaemonSettings.resolve(configPath: path ?? "/dev/null", environment: env, flags: flags); return nil }
        catch { return error.description }
    }

    /// Asserts a ConfigError that starts with `prefix` (file:line and key), bounded in length.
    private func expect(_ message: String?, prefix: String, contains: String? = nil, _ what: @autoclosure () -> String,
                        file: StaticString = #filePath, line: UInt = #line) {
        refusals += 1
        guard let m = message else { return XCTFail("accepted: \(what())", file: file, line: line) }
        XCTAssertTrue(m.hasPrefix(prefix), "\(what()): got \(m.prefix(300))", file: file, line: line)
        if let contains { XCTAssertTrue(m.contains(contains), "\(what()): '\(contains)' not in \(m.prefix(300))", file: file, line: line) }
        XCTAssertLessThan(m.utf8.count, 700, "\(what()): a message of \(m.utf8.count) bytes", file: file, line: line)
    }

    /// A string as a TOML basic string literal.
    private func toml(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case _ where c.value < 0x20 || c.value == 0x7f: out += String(format: "\\u%04X", c.value)
            default: out.unicodeScalars.append(c)
            }
        }
        return out + "\""
    }

    // MARK: What each key accepts and refuses (a switch without default: a new key must be listed)

    /// Malformed values for the string keys (int keys are swept by their ranges).
    private func malformed(_ k: SettingKey) -> [String] {
        let common = ["a\u{1}b", "tab\there", "line\nbreak", String(repeating: "x", count: 100_000)]
        let specific: [String]
        switch k {
        case .socket: specific = ["", "/" + String(repeating: "s", count: 200)]
        case .outputDir: specific = ["", "/" + String(repeating: "d", count: 5000)]
        case .video: specific = ["", "cam", "y4m:", "/dev/", "v4l2:", "v4l2:video0", "rtsp://x"]
        case .audio: specific = ["", "hw:1,0", "alsa:", "wav:", "pulse:default"]
        case .size: specific = ["", "640", "640x", "x360", "641x360", "640x361", "0x0", "8x8", "7682x4320", "-640x360", "640X360",
                                "640x360x2", "640 x 360", "99999999999999999999x2", "0x10x360"]
        case .fps: specific = ["", "0", "-30", "30/0", "0/1", "241", "1/2", "30.0", "30/1001/2", "1/9223372036854775807",
                               "9223372036854775807", "9223372036854775807/9223372036854775806", "-9223372036854775808", "/", "30/"]
        case .pixelFormat: specific = ["", "rgb24", "yuyv ", "h264"]
        case .maxDuration: specific = ["", "-1", "1.2345", "2.", ".5", "1e3", "604801", "604800.001", "+2", " 2", "2,5", "9223372036854775807", "0x10"]
        case .preRoll: specific = ["", "-1", "1.2345", "2.", ".5", "1e3", "301", "300.001", "+2", " 2", "1,5", "9223372036854775807"]
        case .preset: specific = ["", "ultrafasst", "VERYFAST", "veryfast,fast"]
        case .tune: specific = ["films", "film,grain", "film,", ",", "zerolatency,zerolatency", " film"]
        case .profile: specific = ["", "high10", "High", "high444"]
        case .logLevel: specific = ["", "verbose", "INFO"]
        case .controlGroup, .controlUser: specific = ["a b", "-x", "a/b", "a:b", String(repeating: "g", count: 33), "é"]
        case .fsync: specific = ["", "always", "Fragment"]
        case .metricsFile: specific = ["reel.prom", "textfile/reel.prom", "/var/lib/", "/" + String(repeating: "m", count: 5000)]
        case .outboxDir: specific = ["outbox", "./outbox", "/" + String(repeating: "o", count: 5000)]
        case .onFinish: return ["relative/upload", "", "upload"]  // the env/flag form: one program path
        case .standby: return ["", "maybe", "2", "truee", "TRUE x"]
        case .sampleRate, .channels, .crf, .bitrate, .keyint, .audioBitrate, .minFreeMB, .onFinishTimeout, .previewMaxWidth, .previewMaxFps,
             .preRollMaxMB, .keepFreeMB: return []
        }
        return specific + common
    }

    /// Valid values next to the malformed ones, which must be accepted (a sweep that refuses
    /// everything would pass the checks above).
    private func valid(_ k: SettingKey) -> [SettingValue] {
        switch k {
        case .socket: return [.string("/run/x.sock"), .string("/" + String(repeating: "s", count: SettingKey.maxSocketPathBytes - 1))]
        case .outputDir: return [.string("/var/lib/reel"), .string("recordings")]
        case .video: return ["test", "none", "y4m:/in.y4m", "/dev/video0", "v4l2:/dev/video1"].map { .string($0) }
        case .audio: return ["test", "none", "wav:/in.wav", "alsa:default", "alsa:hw:1,0"].map { .string($0) }
        case .size: return ["640x360", "16x16", "7680x4320"].map { .string($0) }
        case .fps: return ["30", "1", "240", "30000/1001", "480/2"].map { .string($0) }
        case .pixelFormat: return ["yuyv", "i420", "mjpeg"].map { .string($0) }
        case .maxDuration: return ["0", "2", "2.5", "0.001", "90.125", "604800", "604800.000"].map { .string($0) }
        case .preRoll: return ["0", "1.5", "0.001", "3", "300", "300.000"].map { .string($0) }
        case .preset: return ["ultrafast", "placebo"].map { .string($0) }
        case .tune: return ["", "film", "film,zerolatency", "fastdecode,zerolatency"].map { .string($0) }
        case .profile: return ["baseline", "high"].map { .string($0) }
        case .logLevel: return ["trace", "critical"].map { .string($0) }
        case .controlGroup, .controlUser: return ["", "reel", "video-users", "svc_1.x"].map { .string($0) }
        case .fsync: return ["fragment", "none"].map { .string($0) }
        case .metricsFile: return ["", "/var/lib/node_exporter/textfile_collector/reel.prom"].map { .string($0) }
        case .outboxDir: return ["", "/var/lib/reel/outbox"].map { .string($0) }
        case .onFinish: return [.strings([]), .strings(["/usr/bin/upload", "--to", "x y"])]
        case .standby: return [.bool(true), .bool(false)]
        case .sampleRate, .channels, .crf, .bitrate, .keyint, .audioBitrate, .minFreeMB, .onFinishTimeout, .previewMaxWidth, .previewMaxFps,
             .preRollMaxMB, .keepFreeMB:
            let r = k.intRange!.range
            return [.int(r.lowerBound), .int(r.upperBound)]
        }
    }

    /// Every TOML type, as a literal, and whether a key of `kind` takes it.
    private let literals: [(name: String, text: String, takes: (SettingKey.Kind) -> Bool)] = [
        ("string", "\"x\"", { $0 == .string || $0 == .stringOrInt }),
        ("integer", "7", { $0 == .int || $0 == .stringOrInt }),
        ("huge integer", "9223372036854775807", { $0 == .int || $0 == .stringOrInt }),
        ("float", "7.5", { _ in false }),
        ("inf", "inf", { _ in false }),
        ("nan", "nan", { _ in false }),
        ("boolean", "true", { $0 == .bool }),
        ("array of integers", "[1, 2]", { _ in false }),
        ("array of strings", "[\"/bin/true\"]", { $0 == .strings }),
        ("nested array", "[[\"/bin/true\"]]", { _ in false }),
        ("mixed array", "[\"/bin/true\", 1]", { _ in false }),
        ("inline table", "{ a = 1 }", { _ in false }),
        ("date", "1979-05-27", { _ in false }),
        ("time", "07:32:00", { _ in false }),
        ("date-time", "1979-05-27T07:32:00Z", { _ in false }),
        ("local date-time", "1979-05-27T07:32:00", { _ in false }),
    ]

    // MARK: The sweep

    func testEveryKeyWithEveryWrongTomlType() {
        var checked = 0
        for k in SettingKey.allCases {
            for lit in literals where !lit.takes(k.kind) {
                let path = file("# hostile\n\(k.rawValue) = \(lit.text)\n")
                expect(error(path), prefix: "\(path):2: key '\(k.rawValue)': expected ", "\(k.rawValue) = \(lit.text)")
                checked += 1
            }
            // A key written as a table, a dotted key, an array of tables.
            for (text, line) in [("[\(k.rawValue)]\nx = 1\n", 1), ("\n\(k.rawValue).x = 1\n", 2), ("[[\(k.rawValue)]]\n", 1)] {
                let path = file(text)
                expect(error(path), prefix: "\(path):\(line): key '\(k.rawValue)': expected ", text)
                checked += 1
            }
        }
        XCTAssertGreaterThan(checked, SettingKey.allCases.count * 10)
    }

    func testEveryIntegerKeyOutOfRangeEverywhere() {
        for k in SettingKey.allCases {
            guard let (r, _) = k.intRange else { continue }
            var bad = [r.lowerBound - 1, r.upperBound + 1, Int.max, Int.min, -1, 0, 1_000_000_000_000].filter { !r.contains($0) }
            bad = Array(Set(bad)).sorted()
            XCTAssertGreaterThanOrEqual(bad.count, 3, k.rawValue)
            for v in bad {
                let path = file("\n\n\(k.rawValue) = \(v)\n")
                expect(error(path), prefix: "\(path):3: key '\(k.rawValue)': \(v) is out of range (use \(r.lowerBound) to \(r.upperBound)",
                       "file \(k.rawValue) = \(v)")
                expect(error(nil, env: [k.environmentVariable: "\(v)"]),
                       prefix: "invalid environment variable \(k.environmentVariable) (key '\(k.rawValue)'): \(v) is out of range", "env \(v)")
                expect(error(nil, flags: [k: .int(v)]), prefix: "invalid \(k.flag): \(v) is out of range", "flag \(v)")
            }
            // Not integers at all, through the environment (the flag parser types its values).
            for raw in ["", "abc", "1.5", "0x10", "1e3", "99999999999999999999", "-99999999999999999999", "12abc", "٣"] {
                expect(error(nil, env: [k.environmentVariable: raw]),
                       prefix: "invalid environment variable \(k.environmentVariable) (key '\(k.rawValue)'): ", contains: "is not an integer", "env '\(raw)'")
            }
            // Beyond 64 bits in the file: TOML's parser refuses it; the message still names the key.
            let path = file("\(k.rawValue) = 99999999999999999999\n")
            expect(error(path), prefix: "\(path):1: key '\(k.rawValue)': ", "file 2^66")
            // A wrongly typed flag value (as a caller in-process could pass it).
            expect(error(nil, flags: [k: .string("7")]), prefix: "invalid \(k.flag): expected an integer", "flag string")
        }
    }

    func testEveryStringKeyWithMalformedValuesEverywhere() {
        for k in SettingKey.allCases where k.intRange == nil {
            let values = malformed(k)
            XCTAssertFalse(values.isEmpty, "no malformed values for \(k.rawValue)")
            for v in values {
                let what = "\(k.rawValue) = \(DaemonSettings.show(v))"
                if k.kind == .strings {
                    let path = file("\(k.rawValue) = [\(toml(v))]\n")
                    expect(error(path), prefix: "\(path):1: key '\(k.rawValue)': ", "file \(what)")
                    // The environment and the flag give one program path; "" there means none.
                    if !v.isEmpty {
                        expect(error(nil, env: [k.environmentVariable: v]),
                               prefix: "invalid environment variable \(k.environmentVariable) (key '\(k.rawValue)'): ", "env \(what)")
                        expect(error(nil, flags: [k: .strings([v])]), prefix: "invalid \(k.flag): ", "flag \(what)")
                    }
                    continue
                }
                let path = file("# 1\n# 2\n\(k.rawValue) = \(toml(v))\n")
                expect(error(path), prefix: "\(path):3: key '\(k.rawValue)': ", "file \(what)")
                expect(error(nil, env: [k.environmentVariable: v]),
                       prefix: "invalid environment variable \(k.environmentVariable) (key '\(k.rawValue)'): ", "env \(what)")
                expect(error(nil, flags: [k: .string(v)]), prefix: "invalid \(k.flag): ", "flag \(what)")
            }
            for v in valid(k) {
                let text: String
                switch v {
                case let .string(s): text = toml(s)
                case let .int(i): text = "\(i)"
                case let .strings(a): text = "[" + a.map(toml).joined(separator: ", ") + "]"
                case let .bool(b): text = "\(b)"
                }
                let path = file("\(k.rawValue) = \(text)\n")
                XCTAssertNil(error(path), "file \(k.rawValue) = \(text) refused")
                XCTAssertNil(error(nil, flags: [k: v]), "flag \(k.flag) \(v) refused")
            }
        }
        // fps written as an integer is a string setting: 0 and 241 are refused the same way.
        for v in [0, 241, -1, Int.max] {
            let path = file("fps = \(v)\n")
            expect(error(path), prefix: "\(path):1: key 'fps': '\(v)' is not N or N/D from 1 to 240", "fps = \(v)")
        }
    }

    func testValidIntegersAtTheBoundsAreAccepted() throws {
        for k in SettingKey.allCases {
            for v in valid(k) {
                guard case let .int(i) = v else { continue }
                let path = file("\(k.rawValue) = \(i)\n")
                let s = try DaemonSettings.resolve(configPath: path, environment: [k.environmentVariable: "\(i)"], flags: [:])
                XCTAssertEqual(s.written(k), .int(i))
                XCTAssertEqual(s.values[keyPath: k.spec.field.keyPath as AnyKeyPath] as? Int, i, k.rawValue)
            }
        }
    }

    // MARK: Keys

    func testUnknownKeysWithAndWithoutDidYouMean() {
        for (key, hint) in [("crff", "crf"), ("min_free", "min_free_mb"), ("outputdir", "output_dir"), ("sample-rate", "sample_rate"),
                            ("Sample_Rate", "sample_rate"), ("REEL_CRF", "crf"), ("bitrat", "bitrate"), ("pixelformat", "pixel_format"),
                            ("log-level", "log_level"), ("fsynk", "fsync")] {
            let path = file("crf = 20\n\(key) = 1\n")
            expect(error(path), prefix: "\(path):2: key '\(key)': unknown key (did you mean '\(hint)'?)", key)
        }
        for key in ["zzzz", "framerate", "q", "\"\"", "\"a b\""] {
            let path = file("\(key) = 1\n")
            let m = error(path)
            expect(m, prefix: "\(path):1: key '", contains: "unknown key; the keys are documented in /etc/reel/reeld.toml", key)
        }
        // A 1 MB key: named, but cut short in the message.
        let long = String(repeating: "k", count: 1_000_000)
        let path = file("\(long) = 1\n")
        expect(error(path), prefix: "\(path):1: key 'kkkk", contains: "(1000000 characters)", "1 MB key")
    }

    func testTheFirstMistakeInTheFileIsTheOneNamed() {
        let path = file("zzz = 1\ncrf = 99\naaa = 2\n")
        expect(error(path), prefix: "\(path):1: key 'zzz': unknown key", "order")
    }

    func testDuplicatedKey() {
        let path = file("crf = 20\nsize = \"640x360\"\ncrf = 21\n")
        expect(error(path), prefix: "\(path):3: key 'crf': ", contains: "fix the TOML syntax", "duplicate")
    }

    func testKnownKeyInATable() {
        let path = file("crf = 20\n\n[encoder]\npreset = \"fast\"\n")
        expect(error(path), prefix: "\(path):3: key 'encoder': reeld.toml has no tables, so 'preset' under [encoder] is not read", "table")
        let p2 = file("[reel]\ncrf = 20\n")
        expect(error(p2), prefix: "\(p2):1: key 'reel': reeld.toml has no tables, so 'crf' under [reel] is not read", "table")
    }

    // MARK: Bytes that are not a config file

    func testNonUTF8NULAndEscapes() {
        let p1 = file(Array("crf = 20\nsize = \"".utf8) + [0xFF, 0xFE] + Array("\"\n".utf8))
        expect(error(p1), prefix: "\(p1):2: byte 0xFF is not UTF-8 text (save the file as UTF-8)", "0xFF")
        let p2 = file(Array("crf = 20\n\n".utf8) + [0xC0, 0x80] + Array(" = 1\n".utf8))  // overlong NUL
        expect(error(p2), prefix: "\(p2):3: byte 0xC0 is not UTF-8 text", "overlong")
        let p3 = file(Array("crf = 20\noutput_dir = \"/tmp".utf8) + [0] + Array("/x\"\n".utf8))
        expect(error(p3), prefix: "\(p3):2: a NUL byte", "NUL")
        let p4 = file("crf = 20\noutput_dir = \"/tmp\\u0000/evil\"\n")
        expect(error(p4), prefix: "\(p4):2: a \\u0000 escape", "\\u0000")
        let p5 = file("crf = 20\n\"crf\\U00000000x\" = 1\n")
        expect(error(p5), prefix: "\(p5):2: a \\u0000 escape", "\\U00000000 key")
        let p6 = file([0xEF, 0xBB, 0xBF] + Array("crf = 20\n".utf8))  // a UTF-8 byte order mark is fine
        XCTAssertNil(error(p6))
    }

    func testEmptyAndCommentOnlyFilesAreTheDefaults() throws {
        for text in ["", "\n\n", "# nothing\n   \n\t# more\n"] {
            let s = try DaemonSettings.resolve(configPath: file(text), environment: [:], flags: [:])
            XCTAssertEqual(s.values, Settings.defaults)
            XCTAssertEqual(s.given, [:])
        }
    }

    func testOneMegabyteOfGarbage() {
        var rng = SplitMix64(seed: 6)
        let random = (0..<1_000_000).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        let p1 = file(random)
        expect(error(p1), prefix: "\(p1):", "random bytes")
        let printable = Array("x".utf8) + (0..<1_000_000).map { _ in UInt8(32 + rng.next() % 95) }
        let p2 = file(printable)
        expect(error(p2), prefix: "\(p2):1: ", "printable garbage")
        // Pathological nesting must not exhaust the stack.
        for (name, text) in [("arrays", "on_finish = " + String(repeating: "[", count: 1_000_000)),
                             ("inline tables", "crf = " + String(repeating: "{a=", count: 300_000)),
                             ("headers", String(repeating: "[", count: 1_000_000)),
                             ("dotted key", "crf" + String(repeating: ".a", count: 500_000) + " = 1"),
                             ("lines", String(repeating: "crf = 1\n", count: 130_000))] {
            let p = file(text)
            expect(error(p), prefix: "\(p):", "1 MB of \(name)")
        }
        // A valid 1 MB file: one setting and a megabyte of comment.
        let p3 = file("crf = 20\n# " + String(repeating: "c", count: 1_000_000) + "\n")
        XCTAssertNil(error(p3))
        // A 1 MB value: refused, and the message stays short.
        let p4 = file("size = \"" + String(repeating: "9", count: 1_000_000) + "\"\n")
        expect(error(p4), prefix: "\(p4):1: key 'size': '9999", contains: "(1000000 characters)", "1 MB value")
    }

    // MARK: The environment

    func testAReelVariableThatLooksLikeASettingIsAWarning() throws {
        let s = try DaemonSettings.resolve(configPath: "/dev/null", environment: ["REEL_CRFF": "20", "REEL_BIN_DIR": "/x", "REEL_TEST_FREEZE_CAPTURE": "/y",
                                                                                     "REEL_OUTPUTDIR": "/z"], flags: [:])
        XCTAssertEqual(s.warnings, ["environment variable REEL_CRFF is not a reeld setting and is ignored (did you mean REEL_CRF?)",
                                    "environment variable REEL_OUTPUTDIR is not a reeld setting and is ignored (did you mean REEL_OUTPUT_DIR?)"])
    }
}


/// Inputs that crashed TOMLKit's parser (toml++ 3), reeld's before TOMLDocument: an assertion on
/// the first character of a table header, or on a '}' where an array expects a value, aborted
/// the process, and a key dotted ~500 000 levels deep overflowed the stack. A lint before parsing
/// refused them while reeld used TOMLKit; TOMLDocument refuses them itself, naming the line and
/// what it found there, or reads them without recursion into what reeld refuses as a setting.
final class ParserHazardTests: XCTestCase {
    private func error(_ text: String) -> String? {
        var s = DaemonSettings()
        do { try s.apply(data: Data(text.utf8), path: "x.toml"); return nil } catch { return error.description }
    }

    private func expectSyntaxError(_ text: String, line: Int, found: String, file: StaticString = #filePath, at: UInt = #line) {
        let m = error(text)
        XCTAssertTrue(m?.hasPrefix("x.toml:\(line): ") == true && m?.contains("found \(found)") == true
                      && m?.hasSuffix("(fix the TOML syntax; see the comments in the installed reeld.toml)") == true,
                      "\(text.prefix(20).debugDescription): \(m ?? "accepted")", file: file, line: at)
    }

    func testHeadersThatWouldAbortAreRefused() {
        for (text, line, found) in [("[[[", 1, "'['"), ("crf = 20\n[[[\n", 2, "'['"), ("[=", 1, "'='"), ("[.]", 1, "'.'"), ("[[#", 1, "'#'"),
                                    ("[ \t#", 1, "'#'"), ("[[{", 1, "'{'"), ("[[,", 1, "','"), ("[[ [", 1, "'['"), ("[é]", 1, "'é'"),
                                    ("[[é]]", 1, "'é'"), ("[\na]", 1, "the end of the line"), ("[[\n", 1, "the end of the line"),
                                    ("\n  [[}", 2, "'}'"), ("[", 1, "the end of the file"), (String(repeating: "[", count: 1_000_000), 1, "'['")] {
            expectSyntaxError(text, line: line, found: found)
        }
        XCTAssertEqual(error("[ [x]]"), "x.toml:1: expected a key (letters, digits, '_' and '-', or a quoted string), found '[' (fix the TOML syntax; see the comments in the installed reeld.toml)")
        // Well-formed headers are refused for what they are.
        XCTAssertTrue(error("[crf]\n")?.hasPrefix("x.toml:1: key 'crf': expected an integer (no quotes), found a table") == true)
        XCTAssertTrue(error("[\"crf\"]\n")?.hasPrefix("x.toml:1: key 'crf': expected an integer") == true)
    }

    /// A dotted key makes a table, which no setting is: refused as such however deep (read
    /// without recursion).
    func testDeeplyDottedKeysAreRefused() {
        for text in ["crf" + String(repeating: ".a", count: 500_000) + " = 1", "[crf" + String(repeating: ".a", count: 500_000) + "]",
                     "crf = { " + String(repeating: "a.", count: 500_000) + "b = 1 }", "crf" + String(repeating: ".a", count: 65) + " = 1",
                     "crf.a = 1"] {
            XCTAssertEqual(error(text), "x.toml:1: key 'crf': expected an integer (no quotes), found a table", String(text.prefix(20)))
        }
        let deep = "zzz" + String(repeating: ".a", count: 500_000) + " = 1"
        XCTAssertEqual(error(deep), "x.toml:1: key 'zzz': unknown key; the keys are documented in /etc/reel/reeld.toml")
        XCTAssertNil(error("on_finish = [\"/bin/x\", \"" + String(repeating: ".", count: 1000) + "\"] # " + String(repeating: ".", count: 1000)))
    }

    func testCRLFLinesAreCounted() {
        XCTAssertEqual(error("# a\r\n# b\r\ncrf = 99\r\n"), "x.toml:3: key 'crf': 99 is out of range (use 1 to 51; 0, lossless, needs a profile reeld does not offer)")
        XCTAssertEqual(error("crf = 20\r\nbogus = 1\r\n")?.hasPrefix("x.toml:2: key 'bogus': unknown key"), true)
    }

    /// 30 000 short random inputs over TOML's significant characters: each is accepted or refused
    /// with a message naming the file and a line, and none crashes the process.
    func testShortRandomInputsNeverCrash() {
        let alphabet: [String] = ["[", "]", "[[", "]]", "{", "}", "=", ".", ",", "\"", "'", "\"\"\"", "'''", "#", "\n", " ", "\t", "\r\n",
                                  "a", "crf", "fps", "on_finish", "1", "-", "_", "+", "0x", "e", "é", "\\", "\\u", "true", "1979-05-27", ":", "T", "Z"]
        var rng = SplitMixForHazards(seed: 42)
        var refused = 0
        for _ in 0..<30_000 {
            let n = 1 + Int(rng.next() % 10)
            let text = (0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }.joined()
            if let m = error(text) {
                refused += 1
                XCTAssertTrue(m.hasPrefix("x.toml:"), "\(text.debugDescription): \(m)")
                XCTAssertLessThan(m.utf8.count, 700)
            }
        }
        XCTAssertGreaterThan(refused, 20_000)
    }
}

private struct SplitMixForHazards {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension ParserHazardTests {
    func testABraceWhereAnArrayExpectsAValueIsRefused() {
        for (text, line) in [("a=[}", 1), ("on_finish=[[}\n", 1), ("a=[ }", 1), ("a=[1,}", 1), ("a={b=[}", 1), ("a=[\n}", 2), ("a=[1\n,}", 2),
                             ("a = \"[\"\nb = [\"}\", '{' ,\n\"\"\"\n]\n\"\"\", }", 5)] {
            expectSyntaxError(text, line: line, found: "'}'")
        }
        XCTAssertEqual(error("on_finish = [}\n"), "x.toml:1: key 'on_finish': expected a value (a \"string\", a number, true/false, a date, [an array] or {a table}), found '}' (fix the TOML syntax; see the comments in the installed reeld.toml)")
        // A ']' that closes a '{', or a '}' a '[': refused too.
        expectSyntaxError("a = {b = 1]", line: 1, found: "']'")
        expectSyntaxError("a = [1}", line: 1, found: "'}'")
        // Brackets inside strings and comments do not count.
        XCTAssertNil(error("on_finish = [\"/bin/x\", \"}\", '}', \"\"\"\n}\"\"\", '''}''' ] # }\n"))
    }
}
