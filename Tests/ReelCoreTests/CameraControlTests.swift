import Foundation
import ReelCore
import XCTest

/// Camera control names and values, judged against a control's description (no device).
final class CameraControlTests: XCTestCase {
    // v4l-utils' name2var: lowercase, each run of non-alphanumerics one '_', none at the ends.
    func testNamesAsV4L2CtlSpellsThem() {
        XCTAssertEqual(CameraControls.name("Brightness"), "brightness")
        XCTAssertEqual(CameraControls.name("White Balance, Automatic"), "white_balance_automatic")
        XCTAssertEqual(CameraControls.name("Exposure Time, Absolute"), "exposure_time_absolute")
        XCTAssertEqual(CameraControls.name("Power Line Frequency"), "power_line_frequency")
        XCTAssertEqual(CameraControls.name("Integer 64 Bits"), "integer_64_bits")
        XCTAssertEqual(CameraControls.name("  (Leading) and trailing!! "), "leading_and_trailing")
        XCTAssertEqual(CameraControls.name("Red--Blue   Gain"), "red_blue_gain")
        XCTAssertEqual(CameraControls.name("Über-Gain"), "ber_gain")  // non-ASCII bytes separate, as isalnum in the C locale
        XCTAssertEqual(CameraControls.name("!!!"), "")
        XCTAssertTrue(CameraControls.isWellFormedName("white_balance_automatic"))
        XCTAssertFalse(CameraControls.isWellFormedName("Brightness"))
        XCTAssertFalse(CameraControls.isWellFormedName("white__balance"))
        XCTAssertFalse(CameraControls.isWellFormedName("_x"))
        XCTAssertFalse(CameraControls.isWellFormedName(""))
    }

    let brightness = CameraControlInfo(name: "brightness", label: "Brightness", id: 0x0098_0900, type: .int, min: 0, max: 255, step: 1,
                                       defaultValue: 128, value: 128, flags: ["slider"])
    let exposure = CameraControlInfo(name: "exposure_time_absolute", label: "Exposure Time, Absolute", id: 0x009a_0902, type: .int,
                                     min: 1, max: 5000, step: 1, defaultValue: 156, value: 156)
    let stepped = CameraControlInfo(name: "gain", label: "Gain", id: 1, type: .int, min: 0, max: 100, step: 10, defaultValue: 0, value: 0)
    let awb = CameraControlInfo(name: "white_balance_automatic", label: "White Balance, Automatic", id: 2, type: .bool,
                                min: 0, max: 1, step: 1, defaultValue: 1, value: 1)
    let plf = CameraControlInfo(name: "power_line_frequency", label: "Power Line Frequency", id: 3, type: .menu, min: 0, max: 3, step: 1,
                                defaultValue: 1, value: 1,
                                menu: [.init(index: 0, name: "Disabled"), .init(index: 1, name: "50 Hz"), .init(index: 3, name: "Auto")])
    let intMenu = CameraControlInfo(name: "integer_menu", label: "Integer Menu", id: 4, type: .intmenu, min: 1, max: 3, step: 1,
                                    defaultValue: 1, value: 1, menu: [.init(index: 1, name: "1"), .init(index: 2, name: "-2"), .init(index: 3, name: "1000")])
    let mask = CameraControlInfo(name: "bitmask", label: "Bitmask", id: 5, type: .bitmask, min: 0, max: 0x8000_250f, step: 0,
                                 defaultValue: 0x8000_0002, value: 0)
    let button = CameraControlInfo(name: "button", label: "Button", id: 6, type: .button, min: 0, max: 0, step: 0, defaultValue: 0, value: nil,
                                   flags: ["write-only"])
    let readOnly = CameraControlInfo(name: "read_only_integer_32_bits", label: "Read-Only Integer 32 Bits", id: 7, type: .int,
                                     min: 0, max: 255, step: 1, defaultValue: 0, value: 0, flags: ["read-only"])

    private func value(_ input: CameraControlInput, _ c: CameraControlInfo) -> Int64? { try? CameraControls.resolve(input, for: c).get() }
    private func message(_ input: CameraControlInput, _ c: CameraControlInfo, camera: String? = nil) -> String? {
        if case let .failure(e) = CameraControls.resolve(input, for: c, camera: camera) { return e.message }
        return nil
    }

    func testIntegersAreCheckedAgainstRangeAndStep() {
        XCTAssertEqual(value(.int(200), brightness), 200)
        XCTAssertEqual(value(.text("0"), brightness), 0)
        XCTAssertEqual(value(.text(" 255 "), brightness), 255)
        XCTAssertEqual(message(.int(99999), exposure),
                       "cannot set exposure_time_absolute=99999: out of range 1...5000 (step 1) (see 'reelctl controls')")
        XCTAssertEqual(message(.int(256), brightness, camera: "/dev/video0 (vivid)"),
                       "cannot set brightness=256 on camera /dev/video0 (vivid): out of range 0...255 (step 1) (see 'reelctl controls')")
        XCTAssertEqual(message(.int(-1), brightness)?.contains("out of range 0...255"), true)
        XCTAssertEqual(message(.text("bright"), brightness),
                       "cannot set brightness=bright: not an integer: expected 0...255 (step 1) (see 'reelctl controls')")
        XCTAssertNotNil(message(.bool(true), brightness))
        XCTAssertEqual(value(.int(30), stepped), 30)
        XCTAssertEqual(message(.int(35), stepped),
                       "cannot set gain=35: not on the step: 0...100 (step 10) takes 0 plus a multiple of 10 (e.g. 30 or 40) (see 'reelctl controls')")
        XCTAssertEqual(message(.int(1), readOnly), "cannot set read_only_integer_32_bits=1: the control is read-only (see 'reelctl controls')")
    }

    func testBooleansTakeTrueFalseOneZero() {
        for (input, want) in [(CameraControlInput.bool(false), Int64(0)), (.bool(true), 1), (.int(1), 1), (.int(0), 0),
                              (.text("true"), 1), (.text("FALSE"), 0), (.text("1"), 1), (.text("0"), 0)] {
            XCTAssertEqual(value(input, awb), want, "\(input)")
        }
        XCTAssertEqual(message(.int(2), awb), "cannot set white_balance_automatic=2: expected true or false (or 1 or 0) (see 'reelctl controls')")
        XCTAssertNotNil(message(.text("yes"), awb))
    }

    func testMenusTakeAnEntryNameAnyCaseOrItsIndex() {
        XCTAssertEqual(value(.text("50 Hz"), plf), 1)
        XCTAssertEqual(value(.text("auto"), plf), 3)
        XCTAssertEqual(value(.text("DISABLED"), plf), 0)
        XCTAssertEqual(value(.int(3), plf), 3)
        XCTAssertEqual(value(.text("0"), plf), 0)
        // Index 2 ("60 Hz") is one this driver skips: not in the menu.
        XCTAssertEqual(message(.int(2), plf),
                       "cannot set power_line_frequency=2: not an entry of the menu: expected one of 0 \"Disabled\", 1 \"50 Hz\", 3 \"Auto\" (a name or its index) (see 'reelctl controls')")
        XCTAssertNotNil(message(.text("60 Hz"), plf))
        XCTAssertNotNil(message(.bool(true), plf))
        // An integer menu: by index, or by the entry's value as written.
        XCTAssertEqual(value(.int(2), intMenu), 2)
        XCTAssertEqual(value(.text("1000"), intMenu), 3)
        XCTAssertEqual(value(.text("-2"), intMenu), 2)
        XCTAssertNotNil(message(.int(4), intMenu))
    }

    func testBitmasksButtonsAndStrings() {
        XCTAssertEqual(value(.text("0x250f"), mask), 0x250f)
        XCTAssertEqual(value(.int(0x8000_0000), mask), 0x8000_0000)
        XCTAssertEqual(message(.int(0x10), mask)?.contains("bits outside the mask: expected a bit mask within 0x8000250f"), true)
        XCTAssertEqual(value(.bool(true), button), 1)
        XCTAssertEqual(value(.text(""), button), 1)
        XCTAssertEqual(message(.int(0), button), "cannot set button=0: button is a button: set it to true (or 1) to press it (see 'reelctl controls')")
        let str = CameraControlInfo(name: "string", label: "String", id: 8, type: .string, min: 2, max: 10, step: 1, defaultValue: 0, value: nil)
        XCTAssertEqual(message(.text("abc"), str)?.contains("a string control, which Reel does not set"), true)
    }

    func testUnknownNamesListCloseOnes() {
        let all = [brightness, exposure, awb, plf, CameraControlInfo(name: "contrast", label: "Contrast", id: 9, type: .int, min: 0, max: 255,
                                                                       step: 1, defaultValue: 128, value: 128)]
        XCTAssertEqual(try? CameraControls.find("brightness", in: all, camera: "c").get().id, brightness.id)
        func err(_ n: String) -> String? { if case let .failure(e) = CameraControls.find(n, in: all, camera: "/dev/video0 (vivid)") { return e.message }; return nil }
        XCTAssertEqual(err("brightnes"), "camera /dev/video0 (vivid) has no control 'brightnes' (did you mean brightness?); 'reelctl controls' lists its 5 controls")
        XCTAssertEqual(err("Brightness"), "camera /dev/video0 (vivid) has no control 'Brightness' (did you mean brightness?); 'reelctl controls' lists its 5 controls")
        XCTAssertEqual(err("white_balance")?.contains("did you mean white_balance_automatic?"), true)
        XCTAssertEqual(err("zoom_absolute"), "camera /dev/video0 (vivid) has no control 'zoom_absolute'; 'reelctl controls' lists its 5 controls")
    }

    func testInputsDecodeFromJSONScalarsByType() throws {
        let d = try JSONDecoder().decode([String: CameraControlInput].self, from: Data(#"{"a":1,"b":true,"c":"x","d":false,"e":0,"f":"1"}"#.utf8))
        XCTAssertEqual(d, ["a": .int(1), "b": .bool(true), "c": .text("x"), "d": .bool(false), "e": .int(0), "f": .text("1")])
        XCTAssertThrowsError(try JSONDecoder().decode([String: CameraControlInput].self, from: Data(#"{"a":1.5}"#.utf8)))
        XCTAssertThrowsError(try JSONDecoder().decode([String: CameraControlInput].self, from: Data(#"{"a":[1]}"#.utf8)))
    }
}
