import CFFmpeg
import CX264Shim
import CX264
import XCTest
import ReelCore
@testable import ReelMedia

/// What `LibraryLog.route`'s sink was given.
/// @unchecked Sendable: `lines` is only touched under `lock`.
private final class Lines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [(Int32, String)] = []
    func add(_ p: Int32, _ s: String) { lock.withLock { lines.append((p, s)) } }
    var all: [(Int32, String)] { lock.withLock { lines } }
}

final class LibraryLogTests: XCTestCase {
    func testLibraryLevelsBecomeSyslogPriorities() {
        XCTAssertEqual([AV_LOG_PANIC, AV_LOG_FATAL, AV_LOG_ERROR, AV_LOG_WARNING, AV_LOG_INFO, AV_LOG_VERBOSE, AV_LOG_DEBUG, AV_LOG_TRACE]
                        .map { LibraryLog.priority(ffmpegLevel: $0) }, [2, 2, 3, 4, 6, 7, 7, 7])
        // X264_LOG_ERROR, _WARNING, _INFO, _DEBUG (x264.h)
        XCTAssertEqual((0...3).map { LibraryLog.priority(x264Level: Int32($0)) }, [3, 4, 6, 7])
    }

    /// FFmpeg's and x264's own messages reach the sink as whole lines at their level.
    func testMessagesReachTheSinkAtTheirLevel() throws {
        let got = Lines()
        LibraryLog.route { got.add($0, $1) }
        defer { LibraryLog.unroute() }
        // FFmpeg, as a codec context logs: its class names it at the start of the line.
        // Unsafe pointer: the context lives until the deferred free, after the one call that logs with it.
        var ctx: UnsafeMutablePointer<AVCodecContext>? = avcodec_alloc_context3(avcodec_find_encoder_by_name("aac"))
        defer { avcodec_free_context(&ctx) }
        withVaList([Int32(3)]) { av_vlog(ctx, AV_LOG_WARNING, "%d things\n", $0) }
        // x264 calls pf_log as H264Encoder leaves it (no setting of ours makes x264 warn at will)
        var p = x264_param_t()
        x264_param_default(&p)
        creel_x264_route_log(&p)
        let pfLog = try XCTUnwrap(p.pf_log)
        withVaList([Int32(7)]) { pfLog(nil, X264_LOG_WARNING, "%d ref frames\n", $0) }
        withVaList([]) { pfLog(nil, X264_LOG_ERROR, "bad\n", $0) }
        let lines = got.all
        XCTAssertTrue(lines.contains { $0.0 == 4 && $0.1.hasPrefix("[aac @ ") && $0.1.hasSuffix("] 3 things") }, "\(lines)")
        XCTAssertEqual(lines.filter { $0.1.hasPrefix("x264") }.map { "\($0.0) \($0.1)" }, ["4 x264 [warning]: 7 ref frames", "3 x264 [error]: bad"])
    }

    /// A bitrate above what AAC carries (6144 bits per channel per 1024 samples: 96000 b/s at 16 kHz
    /// mono, below the default 128000) is lowered by Reel, so libavcodec has nothing to warn about
    /// ("Too many bits 8192 > 6144 per frame requested, clamping to max", once per recording).
    func testAACBitrateIsLoweredToWhatTheFormatCarries() throws {
        let got = Lines()
        LibraryLog.route { got.add($0, $1) }
        defer { LibraryLog.unroute() }
        XCTAssertEqual(try AACEncoder(format: AudioFormat(sampleRate: 16000, channels: 1), settings: AACSettings()).bitrate, 96_000)
        XCTAssertEqual(try AACEncoder(format: AudioFormat(sampleRate: 48000, channels: 2), settings: AACSettings()).bitrate, 128_000)
        var high = AACSettings(); high.bitrate = 512_000
        XCTAssertEqual(try AACEncoder(format: AudioFormat(sampleRate: 44100, channels: 1), settings: high).bitrate, 264_600)
        XCTAssertEqual(got.all.filter { $0.0 <= 4 }.map(\.1), [], "no warning or error from libavcodec")
    }
}
