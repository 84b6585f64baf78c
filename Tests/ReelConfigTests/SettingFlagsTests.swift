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

    func testOtherSettingsNeedTheirValue() {
        XCTAssertEqual(refusal("--crf")?.description, "Missing value for '--crf <value>' (write --crf=VALUE for a value that starts with '--')")
        XCTAssertEqual(refusal("--on-finish")?.description.hasPrefix("Missing value for '--on-finish <value>'"), true)
        XCTAssertEqual(refusal("--crf", "x")?.description, "invalid --crf: 'x' is not an integer")
    }

    func testWhatIsNotASettingFlagIsNamed() {
        XCTAssertEqual(refusal("--crff", "20")?.description, "Unknown option '--crff'. Did you mean '--crf'?")
        XCTAssertEqual(refusal("--zzzzzzzz")?.description, "Unknown option '--zzzzzzzz'.")
        XCTAssertEqual(refusal("20")?.description, "Unexpected argument '20' (reeld takes no positional arguments; see --help)")
    }
}
