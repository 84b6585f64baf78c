@testable import ReelConfig
import XCTest

/// The settings as command-line flags (`SettingFlags`): what reeld's ArgumentParser hands over.
final class SettingFlagsTests: XCTestCase {
    private func parse(_ arguments: String...) throws -> [SettingKey: SettingValue] { try SettingFlags.parse(arguments) }

    private func refusal(_ arguments: String...) -> ConfigError? {
        do { _ = try SettingFlags.parse(arguments); return nil } catch { return error }
    }

    func testValuesAfterTheFlagOrAfterAnEqualsSign() throws {
        XCTAssertEqual(try parse("--crf", "20", "--preset=slow", "--on-finish", "/bin/x"),
                       [.crf: .int(20), .preset: .string("slow"), .onFinish: .strings(["/bin/x"])])
        XCTAssertEqual(try parse("--crf", "20", "--crf=21"), [.crf: .int(21)], "the last one wins")
        XCTAssertEqual(try parse("--tune="), [.tune: .string("")])
        XCTAssertEqual(try parse("--output-dir=--odd"), [.outputDir: .string("--odd")])
    }

    /// `--standby` alone is true, as reeld's own `--unpaced` is; a value still sets it either way.
    func testABooleanFlagAloneMeansTrue() throws {
        XCTAssertEqual(try parse("--standby"), [.standby: .bool(true)])
        XCTAssertEqual(try parse("--standby", "--crf", "20"), [.standby: .bool(true), .crf: .int(20)])
        XCTAssertEqual(try parse("--crf", "20", "--standby"), [.standby: .bool(true), .crf: .int(20)])
        XCTAssertEqual(try parse("--standby=false"), [.standby: .bool(false)])
        XCTAssertEqual(try parse("--standby", "false"), [.standby: .bool(false)])
        XCTAssertEqual(try parse("--standby", "off", "--crf=20"), [.standby: .bool(false), .crf: .int(20)])
        XCTAssertEqual(try parse("--standby", "false", "--standby"), [.standby: .bool(true)])
        XCTAssertEqual(try parse("--standby=yes"), [.standby: .bool(true)])
        // What follows is its value when it is not a flag: a word that is not a boolean is an error.
        XCTAssertEqual(refusal("--standby", "maybe")?.description, "invalid --standby: 'maybe' is not true or false")
        XCTAssertEqual(refusal("--standby=")?.description, "invalid --standby: '' is not true or false")
        XCTAssertEqual(refusal("--standby", "maybe")?.origin, .flag("--standby"))
        // Every boolean setting, the same way (none but standby today; a new one needs no change here).
        for key in SettingKey.allCases where key.kind == .bool {
            XCTAssertEqual(try parse(key.flag), [key: .bool(true)], key.flag)
        }
    }

    func testOtherSettingsNeedTheirValue() {
        XCTAssertEqual(refusal("--crf")?.description, "Missing value for '--crf <value>' (write --crf=VALUE for a value that starts with '--')")
        XCTAssertEqual(refusal("--crf", "--standby")?.description, "Missing value for '--crf <value>' (write --crf=VALUE for a value that starts with '--')")
        XCTAssertEqual(refusal("--on-finish")?.description.hasPrefix("Missing value for '--on-finish <value>'"), true)
        XCTAssertEqual(refusal("--crf", "x")?.description, "invalid --crf: 'x' is not an integer")
    }

    func testWhatIsNotASettingFlagIsNamed() {
        XCTAssertEqual(refusal("--crff", "20")?.description, "Unknown option '--crff'. Did you mean '--crf'?")
        XCTAssertEqual(refusal("--zzzzzzzz")?.description, "Unknown option '--zzzzzzzz'.")
        XCTAssertEqual(refusal("20")?.description, "Unexpected argument '20' (reeld takes no positional arguments; see --help)")
    }
}
