import XCTest
@testable import ReelCore

final class CaptureTests: XCTestCase {
    /// What vivid's webcam input offers (a subset): YUYV and UYVY at 320x180 and 640x360.
    let offer: [CameraFormat] = [
        CameraFormat(fourcc: fourCC("YUYV"), description: "YUYV 4:2:2", sizes: [
            CameraSize(width: 320, height: 180, rates: .discrete([Rational(60), Rational(30), Rational(25, 2)])),
            CameraSize(width: 640, height: 360, rates: .discrete([Rational(30), Rational(15)])),
        ]),
        CameraFormat(fourcc: fourCC("UYVY"), description: "UYVY 4:2:2", sizes: [
            CameraSize(width: 640, height: 360, rates: .discrete([Rational(30)])),
        ]),
        CameraFormat(fourcc: fourCC("RGBP"), description: "16-bit RGB 5-6-5", sizes: []),
    ]

    func request(_ w: Int, _ h: Int, _ fps: Rational, _ f: CameraPixelFormat) -> CameraRequest {
        CameraRequest(width: w, height: h, fps: fps, pixelFormat: f)
    }

    func error(_ r: CameraRequest, _ formats: [CameraFormat]? = nil) -> String? {
        if case let .failure(e) = negotiateCamera(r, offer: formats ?? offer, device: "/dev/video0 (vivid)") { return e.description }
        return nil
    }

    func testFourCC() {
        XCTAssertEqual(fourCC("YUYV"), 0x5659_5559)  // V4L2_PIX_FMT_YUYV
        XCTAssertEqual(fourCCString(fourCC("MJPG")), "MJPG")
        XCTAssertEqual(fourCCString(fourCC("Y8  ")), "Y8")
        XCTAssertEqual(CameraPixelFormat(fourcc: fourCC("JPEG")), .mjpeg)
        XCTAssertEqual(CameraPixelFormat(fourcc: fourCC("YU12")), .yuv420)
        XCTAssertNil(CameraPixelFormat(fourcc: fourCC("RGBP")))
        XCTAssertEqual(CameraPixelFormat(name: "I420"), .yuv420)
        XCTAssertEqual(CameraPixelFormat.mjpeg.delivered, .i420)
    }

    func testExactMatchesNegotiate() {
        XCTAssertNil(error(request(640, 360, Rational(30), .yuyv)))
        XCTAssertNil(error(request(320, 180, Rational(25, 2), .yuyv)))
        XCTAssertNil(error(request(640, 360, Rational(30, 1), .uyvy)))
        // Rates compare as exact rationals: 60/2 is 30.
        XCTAssertNil(error(request(640, 360, Rational(60, 2), .yuyv)))
    }

    func testUnsupportedSizeListsTheOffer() throws {
        let e = try XCTUnwrap(error(request(1280, 720, Rational(30), .yuyv)))
        XCTAssertTrue(e.hasPrefix("/dev/video0 (vivid) cannot capture 1280x720 yuyv at 30 fps: it does not offer yuyv at 1280x720."), e)
        XCTAssertTrue(e.contains("  yuyv (YUYV): YUYV 4:2:2\n    320x180 at 60, 30, 25/2 fps\n    640x360 at 30, 15 fps"), e)
        XCTAssertTrue(e.contains("  uyvy (UYVY): UYVY 4:2:2\n    640x360 at 30 fps"), e)
        XCTAssertTrue(e.contains("\n  not recordable by Reel: RGBP\n"), e)
        XCTAssertTrue(e.contains("reelctl devices"), e)
    }

    func testUnsupportedRateAndFormat() throws {
        let rate = try XCTUnwrap(error(request(640, 360, Rational(60), .yuyv)))
        XCTAssertTrue(rate.contains("it offers yuyv 640x360 only at 30, 15 fps"), rate)
        let fmt = try XCTUnwrap(error(request(640, 360, Rational(30), .mjpeg)))
        XCTAssertTrue(fmt.contains("it does not offer pixel format mjpeg"), fmt)
        let none = try XCTUnwrap(error(request(640, 360, Rational(30), .yuyv), []))
        XCTAssertTrue(none.contains("(no capture formats)"), none)
    }

    func testStepwiseSizesAndRateRanges() {
        let stepwise = [CameraFormat(fourcc: fourCC("NV12"), description: "Y/CbCr 4:2:0", sizes: [],
                                     sizeRange: .init(minWidth: 16, maxWidth: 1920, stepWidth: 16, minHeight: 16, maxHeight: 1080, stepHeight: 8))]
        XCTAssertNil(error(request(640, 360, Rational(30), .nv12), stepwise))
        XCTAssertNotNil(error(request(648, 360, Rational(30), .nv12), stepwise))
        let ranged = [CameraFormat(fourcc: fourCC("YUYV"), description: "YUYV", sizes: [
            CameraSize(width: 640, height: 360, rates: .range(min: Rational(1), max: Rational(30)))])]
        XCTAssertNil(error(request(640, 360, Rational(30000, 1001), .yuyv), ranged))
        XCTAssertNotNil(error(request(640, 360, Rational(60), .yuyv), ranged))
    }

    func testSequenceGapCountsDropsModulo2To32() {
        XCTAssertEqual(sequenceGap(previous: 5, current: 6), 0)
        XCTAssertEqual(sequenceGap(previous: 5, current: 9), 3)
        // vivid's wrap_sequence_number: the counter wraps from 0xffffffff to 0.
        XCTAssertEqual(sequenceGap(previous: UInt32.max, current: 0), 0)
        XCTAssertEqual(sequenceGap(previous: UInt32.max - 1, current: 2), 3)
        // A repeat or a restart backwards is not a loss.
        XCTAssertEqual(sequenceGap(previous: 9, current: 9), 0)
        XCTAssertEqual(sequenceGap(previous: 1000, current: 3), 0)
        // Summing gaps over a wrapping sequence with every 10th frame lost.
        var last: UInt32 = 0xffff_ff80, lost: UInt32 = 0
        var seq = last
        for i in 1...301 {
            seq &+= 1
            if i % 10 == 0 { continue }
            lost += sequenceGap(previous: last, current: seq)
            last = seq
        }
        XCTAssertEqual(lost, 30)
    }

    func testALSACaptureTime() {
        // 480 frames just read at 48 kHz, 960 still buffered when the status was taken at
        // t = 10 s: the first frame read was captured 1440 frames (30 ms) before 10 s.
        XCTAssertEqual(alsaCaptureTime(htstamp: 10 * nanosPerSecond, delayFrames: 960, framesJustRead: 480, sampleRate: 48000),
                       10 * nanosPerSecond - 30_000_000)
        // 44.1 kHz: 441 frames = exactly 10 ms; rounding to the nearest ns otherwise.
        XCTAssertEqual(alsaCaptureTime(htstamp: 1_000_000_000, delayFrames: 0, framesJustRead: 441, sampleRate: 44100), 990_000_000)
        XCTAssertEqual(alsaCaptureTime(htstamp: 1_000_000_000, delayFrames: 1, framesJustRead: 0, sampleRate: 44100), 1_000_000_000 - 22_676)
    }

    func testALSALostSamplesAfterOverrun() {
        let t = 5 * nanosPerSecond
        // Due at t, the first sample after recovery was captured 250 ms later: 12000 lost.
        XCTAssertEqual(alsaLostSamples(expectedTime: t, actualTime: t + 250_000_000, sampleRate: 48000, tolerance: 240), 12000)
        // Timestamp jitter within half a period is no loss, and early is never negative.
        XCTAssertEqual(alsaLostSamples(expectedTime: t, actualTime: t + 4_000_000, sampleRate: 48000, tolerance: 240), 0)
        XCTAssertEqual(alsaLostSamples(expectedTime: t, actualTime: t - 50_000_000, sampleRate: 48000, tolerance: 240), 0)
    }

    /// An overrun in a clean-clone `make test` run: snd-aloop stamped the first period after the
    /// restart as captured where the last one before the 1.6 s freeze ended, the loss came out as
    /// 0 samples, and the audio after it ran 1.5 s early. Nothing read after a restart was
    /// captured before it.
    func testOverrunLossIsTimedFromTheRestartWhenTheStampIsStale() {
        let expected: Nanos = 10 * nanosPerSecond, restart = expected + 1_500_000_000
        let stale = expected + 1_000_000
        let period: Nanos = 10_000_000
        let t = alsaFirstCaptureTimeAfterRestart(stamped: stale, restartedAt: restart, slack: period)
        XCTAssertEqual(t, restart)
        XCTAssertEqual(alsaLostSamples(expectedTime: expected, actualTime: t, sampleRate: 48000, tolerance: 240), 72000)
        XCTAssertEqual(alsaLostSamples(expectedTime: expected, actualTime: stale, sampleRate: 48000, tolerance: 240), 0,
                       "the stale stamp alone hides the loss")
        // A stamp after the restart, or a little before it (the driver's granularity: snd-aloop
        // stamps 1-3 ms early), is the better measure and is kept.
        XCTAssertEqual(alsaFirstCaptureTimeAfterRestart(stamped: restart + 3_000_000, restartedAt: restart, slack: period), restart + 3_000_000)
        XCTAssertEqual(alsaFirstCaptureTimeAfterRestart(stamped: restart - 3_000_000, restartedAt: restart, slack: period), restart - 3_000_000)
    }
}
