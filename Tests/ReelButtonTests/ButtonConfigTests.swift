import Foundation
import ReelConfig
import ReelCore
import XCTest

@testable import ReelButton

/// `[button]` of reeld.toml: the keys, the LED, the long press and the debounce, with errors that
/// name the file, the line and the fix.
final class ButtonConfigTests: XCTestCase {
    let path = "/etc/reel/reeld.toml"

    func read(_ text: String) throws -> ButtonConfig { try ButtonConfig(text: text, path: path) }

    func error(_ text: String) -> String {
        do { _ = try read(text); return "no error" } catch { return "\(error)" }
    }

    func testReadsTheTable() throws {
        let c = try read("""
            output_dir = "/srv/reel"
            [camera.controls]
            brightness = 1
            [button]
            hold = "KEY_SPACE"
            toggle = ["BTN_0", "KEY_F13"]
            retake = "KEY_BACKSPACE"
            stop = "KEY_ESC"
            long_press_ms = 3000
            debounce_ms = 20
            led = "LED_MISC"
            """)
        XCTAssertEqual(c.bindings.map(\.name), ["KEY_SPACE", "BTN_0", "KEY_F13", "KEY_BACKSPACE", "KEY_ESC"])
        XCTAssertEqual(c.bindings.map(\.role), [.hold, .toggle, .toggle, .retake, .stop])
        XCTAssertEqual(c.bindings.map(\.line), [5, 6, 6, 7, 8])
        XCTAssertEqual(c.settings, .init(debounceNs: 20_000_000, longPressNs: 3_000_000_000))
        XCTAssertEqual(c.light, .inputLED(name: "LED_MISC", line: 11))
        let sysfs = try read("[button]\nhold = \"BTN_0\"\nled = \"/sys/class/leds/tally\"\n")
        XCTAssertEqual(sysfs.light, .ledClass(path: "/sys/class/leds/tally", line: 3))
        XCTAssertEqual(sysfs.settings, .init(), "defaults: 30 ms debounce, no long press")
    }

    func testErrorsNameTheFileTheLineAndTheFix() {
        XCTAssertEqual(error("[button]\nhold = \"KEY_SPACE\"\nhodl = \"KEY_A\"\n"),
                       "/etc/reel/reeld.toml:3: [button] hodl: unknown key (the keys of [button] are hold, toggle, retake, stop, long_press_ms, debounce_ms, led)")
        XCTAssertEqual(error("[button]\nhold = 57\n"),
                       "/etc/reel/reeld.toml:2: [button] hold: expected a key name such as \"KEY_SPACE\" or an array of them, found integer")
        XCTAssertEqual(error("[button]\nhold = \"KEY_A\"\nstop = \"KEY_A\"\n"),
                       "/etc/reel/reeld.toml:3: [button] stop: KEY_A is already the hold key (line 2); a key has one role")
        XCTAssertEqual(error("[button]\nhold = \"KEY_A\"\nlong_press_ms = \"3s\"\n"),
                       "/etc/reel/reeld.toml:3: [button] long_press_ms: expected an integer number of milliseconds (no quotes), found string")
        XCTAssertEqual(error("[button]\nhold = \"KEY_A\"\ndebounce_ms = 5000\n"),
                       "/etc/reel/reeld.toml:3: [button] debounce_ms: 5000 is out of range 0 to 1000 (milliseconds)")
        XCTAssertTrue(error("[button]\nhold = \"KEY_A\"\nled = \"/dev/led\"\n").hasPrefix(
            "/etc/reel/reeld.toml:3: [button] led: '/dev/led' is not a LED class device"))
        XCTAssertTrue(error("[button]\nled = \"LED_MISC\"\n").hasPrefix("/etc/reel/reeld.toml:1: [button] names no key"))
        XCTAssertTrue(error("output_dir = \"/v\"\n").hasPrefix("/etc/reel/reeld.toml: no [button] table"))
        XCTAssertTrue(error("button = 1\n").hasPrefix("/etc/reel/reeld.toml:1: 'button' must be a [button] table"))
        XCTAssertTrue(error("[button\n").hasPrefix("/etc/reel/reeld.toml:1: "))
    }

    /// The kernel's names (a stand-in for libevdev's table) and a pedal offering three keys.
    let kernel = ["KEY_SPACE": 57, "BTN_0": 256, "KEY_ESC": 1, "KEY_F13": 183, "LED_MISC": 8, "LED_CAPSL": 1]
    let pedal: Set<Int> = [57, 256, 1]

    func resolve(_ text: String) throws -> [ButtonConfig.Key] {
        try read(text).resolve(device: "/dev/input/by-id/usb-Pedal-event-kbd (Pedal)", code: { self.kernel[$0] },
                               offers: { self.pedal.contains($0) }, offered: { ["KEY_ESC", "KEY_SPACE", "BTN_0"] })
    }

    func testKeysResolveAgainstTheDevice() throws {
        let keys = try resolve("[button]\nhold = \"KEY_SPACE\"\nstop = [\"KEY_ESC\", \"BTN_0\"]\n")
        XCTAssertEqual(keys, [.init(name: "KEY_SPACE", code: 57, role: .hold), .init(name: "KEY_ESC", code: 1, role: .stop),
                              .init(name: "BTN_0", code: 256, role: .stop)])
    }

    func testAnUnknownKeyNamesTheLineAndWhatTheDeviceOffers() {
        func message(_ text: String) -> String {
            do { _ = try resolve(text); return "no error" } catch { return "\(error)" }
        }
        XCTAssertEqual(message("[button]\nhold = \"KEY_SPACE\"\n\ntoggle = \"KEY_SPCE\"\n"),
                       "/etc/reel/reeld.toml:4: [button] toggle: no key is named 'KEY_SPCE'; it offers KEY_ESC, KEY_SPACE, BTN_0 (name one of those, as the kernel names it)")
        XCTAssertEqual(message("[button]\nhold = \"KEY_F13\"\n"),
                       "/etc/reel/reeld.toml:2: [button] hold: /dev/input/by-id/usb-Pedal-event-kbd (Pedal) has no key KEY_F13; it offers KEY_ESC, KEY_SPACE, BTN_0 (name one of those, as the kernel names it)")
    }

    func testAnLEDTheDeviceDoesNotHaveIsAnError() throws {
        let c = try read("[button]\nhold = \"KEY_SPACE\"\nled = \"LED_MISC\"\n")
        XCTAssertEqual(try c.resolveLED("LED_MISC", line: 3, device: "pedal", code: { self.kernel[$0] }, offers: { $0 == 8 }, offered: { ["LED_MISC"] }), 8)
        do {
            _ = try c.resolveLED("LED_MISC", line: 3, device: "pedal", code: { self.kernel[$0] }, offers: { _ in false }, offered: { [] })
            XCTFail("no error")
        } catch {
            XCTAssertTrue("\(error)".hasPrefix("/etc/reel/reeld.toml:3: [button] led: pedal has no LED LED_MISC; it has no LEDs (use a LED class device"), "\(error)")
        }
        do {
            _ = try c.resolveLED("LED_MISK", line: 3, device: "pedal", code: { self.kernel[$0] }, offers: { $0 == 8 }, offered: { ["LED_MISC", "LED_CAPSL"] })
            XCTFail("no error")
        } catch {
            XCTAssertEqual("\(error)", "/etc/reel/reeld.toml:3: [button] led: no LED is named 'LED_MISK'; it offers LED_MISC, LED_CAPSL (name one of those, or a LED class device \"/sys/class/leds/NAME\")")
        }
    }

    func testNamesTheKernelDoesNotHaveAreErrorsWhileTheDeviceIsAbsent() throws {
        let good = try read("[button]\nhold = \"KEY_SPACE\"\nled = \"LED_MISC\"\n")
        XCTAssertNoThrow(try good.checkNames(keyCode: { self.kernel[$0] }, ledCode: { self.kernel[$0] }, device: "/dev/input/by-id/x"))
        let bad = try read("[button]\nhold = \"KEY_SPACE\"\nstop = \"KEY_SPCE\"\n")
        XCTAssertThrowsError(try bad.checkNames(keyCode: { self.kernel[$0] }, ledCode: { self.kernel[$0] }, device: "/dev/input/by-id/x")) {
            XCTAssertEqual("\($0)", "/etc/reel/reeld.toml:3: [button] stop: no key is named 'KEY_SPCE' (name it as the kernel does, e.g. KEY_SPACE or BTN_0; /dev/input/by-id/x is not present to list its own)")
        }
        let led = try read("[button]\nhold = \"KEY_SPACE\"\nled = \"LED_MISK\"\n")
        XCTAssertThrowsError(try led.checkNames(keyCode: { self.kernel[$0] }, ledCode: { self.kernel[$0] }, device: "x")) {
            XCTAssertTrue("\($0)".hasPrefix("/etc/reel/reeld.toml:3: [button] led: no LED is named 'LED_MISK'"), "\($0)")
        }
    }

    /// reeld reads the same file: it must take [button] as reel-button's and still refuse the rest.
    func testReeldSkipsTheButtonTable() throws {
        var s = DaemonSettings()
        try s.apply(data: Data("output_dir = \"/srv/reel\"\n[button]\nhold = \"KEY_SPACE\"\nled = \"LED_MISC\"\n".utf8), path: path)
        var t = DaemonSettings()
        XCTAssertThrowsError(try t.apply(data: Data("[buttons]\nhold = \"KEY_SPACE\"\n".utf8), path: path))
    }
}
