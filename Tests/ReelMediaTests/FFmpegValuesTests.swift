import CFFmpeg
import CFFmpegShim
import Glibc
import XCTest
import ReelCore
import ReelFFmpeg
@testable import ReelMedia

/// ReelFFmpeg, the one home of FFmpeg's handles and values (ReelMedia and ReelVerify both use it):
/// av_strerror's text, AVRational as Rational, and a handle's failure as the caller's error.
final class FFmpegValuesTests: XCTestCase {
    func testErrorTextIsFFmpegs() {
        XCTAssertEqual(avErrorText(creel_averror(ENOENT)), "No such file or directory")
        XCTAssertEqual(avErrorText(creel_averror_eof()), "End of file")
    }

    /// FFmpeg's 0/0 ("no rate") is nil, not a division by zero; the rest reduced, as Rational is.
    func testRationalFromAVRational() {
        XCTAssertEqual(Rational(AVRational(num: 30000, den: 1001)), Rational(30000, 1001))
        XCTAssertEqual(Rational(AVRational(num: 2, den: 30)), Rational(1, 15))
        XCTAssertNil(Rational(AVRational(num: 0, den: 0)))
        XCTAssertNil(Rational(AVRational(num: 0, den: 1)))
        XCTAssertNil(Rational(AVRational(num: 1, den: 0)))
    }

    /// An input that cannot be opened throws the caller's error, made from av_strerror's text:
    /// ReelMedia's reader names the file (ReelVerify's scan, its own words: VerifyTests).
    func testInputThatCannotBeOpenedIsTheCallersError() {
        XCTAssertThrowsError(try MediaFileReader(path: "/nonexistent-reel/x.y4m", video: true)) {
            XCTAssertEqual(($0 as? MediaError)?.message, "cannot read video file /nonexistent-reel/x.y4m: No such file or directory")
        }
        XCTAssertThrowsError(try InputContext(path: "/nonexistent-reel/x.wav", format: nil) { MediaError("opening: \($0)") }) {
            XCTAssertEqual(($0 as? MediaError)?.message, "opening: No such file or directory")
        }
    }
}
