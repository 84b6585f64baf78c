import XCTest
@testable import ReelCore

/// `reelctl set`'s overrides: kept for the camera they were set on, dropped when another camera
/// appears at the path, cleared by `set --reset`.
final class CameraOverridesTests: XCTestCase {
    let c615 = "uvcvideo HD Webcam C615 at usb-0000:00:14.0-1"
    let brio = "uvcvideo Logitech BRIO at usb-0000:00:14.0-1"

    func a(_ name: String, _ v: Int64) -> CameraControlAssignment { CameraControlAssignment(name: name, input: .int(v), origin: "") }

    func testLaterSetsWinAndTheSameCameraGetsThem() {
        var o = CameraOverrides()
        XCTAssertEqual(o.record([a("brightness", 100), a("contrast", 20)], on: c615), [])
        XCTAssertEqual(o.record([a("brightness", 140)], on: c615), [])
        XCTAssertEqual(o.forCamera(c615).assignments, [a("contrast", 20), a("brightness", 140)])
        XCTAssertEqual(o.forCamera(nil).assignments, [a("contrast", 20), a("brightness", 140)], "unidentified: kept")
    }

    func testADifferentCameraDropsThem() {
        var o = CameraOverrides()
        o.record([a("brightness", 100), a("exposure_time_absolute", 300)], on: c615)
        let other = o.forCamera(brio)
        XCTAssertEqual(other.assignments, [])
        XCTAssertEqual(other.dropped, ["brightness", "exposure_time_absolute"])
        // The first camera back: they are gone for good (the user set up the other one since).
        XCTAssertEqual(o.forCamera(c615).assignments, [])
        // A set on the new camera starts its own list; a set on yet another drops that one first.
        o.record([a("zoom_absolute", 2)], on: brio)
        XCTAssertEqual(o.record([a("brightness", 1)], on: c615), ["zoom_absolute"])
        XCTAssertEqual(o.assignments, [a("brightness", 1)])
        XCTAssertEqual(o.camera, c615)
    }

    func testResetClearsAllOrTheNamedOnes() {
        var o = CameraOverrides()
        o.record([a("brightness", 100), a("contrast", 20), a("gain", 3)], on: c615)
        let some = o.reset(["contrast", "saturation"])
        XCTAssertEqual(some.removed, ["contrast"])
        XCTAssertEqual(some.notSet, ["saturation"])
        XCTAssertEqual(o.assignments, [a("brightness", 100), a("gain", 3)])
        let all = o.reset(nil)
        XCTAssertEqual(all.removed, ["brightness", "gain"])
        XCTAssertEqual(o.assignments, [])
        XCTAssertNil(o.camera)
    }
}
