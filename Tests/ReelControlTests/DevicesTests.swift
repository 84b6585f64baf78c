import Foundation
import XCTest
import ReelCore
@testable import ReelControl

final class DevicesTests: XCTestCase {
    let list = DeviceList(
        video: [VideoDeviceInfo(path: "/dev/video0", name: "vivid", driver: "vivid", bus: "platform:vivid-000", formats: [
            VideoFormatInfo(CameraFormat(fourcc: fourCC("YUYV"), description: "YUYV 4:2:2", sizes: [
                CameraSize(width: 640, height: 360, rates: .discrete([Rational(30), Rational(25, 2)]))])),
            VideoFormatInfo(CameraFormat(fourcc: fourCC("RGBP"), description: "16-bit RGB 5-6-5", sizes: [])),
        ])],
        audio: [AudioDeviceInfo(device: "hw:Loopback,1", card: 0, pcm: 1, cardName: "Loopback", name: "Loopback PCM",
                                offer: "S16_LE, S32_LE, FLOAT_LE; 1-32 channels; 8000-192000 Hz")])

    func testDevicesReplyJSONIsOrderedAndRoundTrips() throws {
        var reply = Reply.success(id: 4)
        reply.devices = list
        let line = try Wire.text(reply)
        XCTAssertTrue(line.hasPrefix(#"{"v":1,"id":4,"ok":true,"devices":{"video":[{"path":"/dev/video0","name":"vivid","driver":"vivid","bus":"platform:vivid-000","formats":[{"fourcc":"YUYV","pixelFormat":"yuyv","description":"YUYV 4:2:2","sizes":[{"width":640,"height":360,"fps":["30","25/2"]}]},{"fourcc":"RGBP","pixelFormat":null,"#), line)
        XCTAssertTrue(line.contains(#""audio":[{"device":"hw:Loopback,1","card":0,"pcm":1,"cardName":"Loopback","name":"Loopback PCM","offer":"S16_LE, S32_LE, FLOAT_LE; 1-32 channels; 8000-192000 Hz"}]"#), line)
        let decoded = try JSONDecoder().decode(Reply.self, from: Data(line.utf8))
        XCTAssertEqual(decoded, reply)
        XCTAssertEqual(try Wire.parseRequest(Array(#"{"v":1,"cmd":"devices"}"#.utf8)).get(), Request(cmd: .devices))
    }

    func testDevicesTable() {
        let text = DevicesText.render(list)
        XCTAssertTrue(text.contains("  /dev/video0  vivid  yuyv (YUYV)  640x360  30, 25/2\n"), text)
        XCTAssertTrue(text.contains("  /dev/video0  vivid  unsupported  -        RGBP\n"), text)
        XCTAssertTrue(text.contains("  hw:Loopback,1  Loopback  Loopback PCM  S16_LE"), text)
        let empty = DevicesText.render(DeviceList(video: [], audio: []))
        XCTAssertTrue(empty.contains("none found (is the camera plugged in?"), empty)
    }
}
