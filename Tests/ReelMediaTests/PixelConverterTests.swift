import XCTest
import ReelCore
@testable import ReelMedia

final class PixelConverterTests: XCTestCase {
    /// Converts `src` and returns the Y, U, V planes as arrays.
    func planes(_ c: PixelConverter, _ src: [UInt8]) throws -> ([UInt8], [UInt8], [UInt8]) {
        // read inside the closure: an I420 source is viewed, not copied
        try src.withUnsafeBytes { raw in
            let f = try c.convert(raw)
            let (w, h) = (c.width, c.height)
            return (Array(UnsafeBufferPointer(start: f.y, count: w * h)),
                    Array(UnsafeBufferPointer(start: f.u, count: w * h / 4)),
                    Array(UnsafeBufferPointer(start: f.v, count: w * h / 4)))
        }
    }

    func testI420IsViewedNotCopied() throws {
        let c = try PixelConverter(width: 4, height: 2, from: .i420)
        let src = luma + [1, 2, 3, 4]
        try src.withUnsafeBytes { raw in
            let f = try c.convert(raw)
            XCTAssertEqual(UnsafeRawPointer(f.y), raw.baseAddress)
            XCTAssertEqual(UnsafeRawPointer(f.u), raw.baseAddress! + 8)
            XCTAssertEqual(UnsafeRawPointer(f.v), raw.baseAddress! + 10)
        }
    }

    /// Into a caller's buffer, as a source thread converts into its pool slot: 4:2:2 planar
    /// (the Y4M files) averages each chroma pair of rows.
    func testI422IntoACallersBuffer() throws {
        let c = try PixelConverter(width: 4, height: 2, from: .i422)
        let src = luma + row0U + row1U + row0V + row1V
        var dst = [UInt8](repeating: 0, count: 12)
        try src.withUnsafeBytes { s in try dst.withUnsafeMutableBytes { try c.convert(s, into: $0) } }
        XCTAssertEqual(dst, luma + expectedU + expectedV)
        var small = [UInt8](repeating: 0, count: 11)
        XCTAssertThrowsError(try src.withUnsafeBytes { s in try small.withUnsafeMutableBytes { try c.convert(s, into: $0) } }) {
            XCTAssertTrue(($0 as? MediaError)?.message.contains("the I420 buffer has 11 bytes") == true, "\($0)")
        }
    }

    // A 4x2 image: luma 10...80; chroma differs between the two rows, so the converter must
    // average each 2x2 block vertically (libyuv rounds half up: (a + b + 1) / 2).
    let luma: [UInt8] = [10, 20, 30, 40, 50, 60, 70, 80]
    let row0U: [UInt8] = [100, 110], row1U: [UInt8] = [102, 113]
    let row0V: [UInt8] = [200, 210], row1V: [UInt8] = [202, 215]
    let expectedU: [UInt8] = [101, 112], expectedV: [UInt8] = [201, 213]

    func testYUYVToI420() throws {
        var src: [UInt8] = []
        for row in 0..<2 {
            let (u, v) = row == 0 ? (row0U, row0V) : (row1U, row1V)
            for pair in 0..<2 { src += [luma[row * 4 + pair * 2], u[pair], luma[row * 4 + pair * 2 + 1], v[pair]] }
        }
        let (y, u, v) = try planes(PixelConverter(width: 4, height: 2, from: .yuyv), src)
        XCTAssertEqual(y, luma); XCTAssertEqual(u, expectedU); XCTAssertEqual(v, expectedV)
    }

    func testUYVYToI420() throws {
        var src: [UInt8] = []
        for row in 0..<2 {
            let (u, v) = row == 0 ? (row0U, row0V) : (row1U, row1V)
            for pair in 0..<2 { src += [u[pair], luma[row * 4 + pair * 2], v[pair], luma[row * 4 + pair * 2 + 1]] }
        }
        let (y, u, v) = try planes(PixelConverter(width: 4, height: 2, from: .uyvy), src)
        XCTAssertEqual(y, luma); XCTAssertEqual(u, expectedU); XCTAssertEqual(v, expectedV)
    }

    func testNV12AndI420() throws {
        let (y, u, v) = try planes(PixelConverter(width: 4, height: 2, from: .nv12), luma + [1, 2, 3, 4])
        XCTAssertEqual(y, luma); XCTAssertEqual(u, [1, 3]); XCTAssertEqual(v, [2, 4])
        let (y2, u2, v2) = try planes(PixelConverter(width: 4, height: 2, from: .i420), luma + [1, 2, 3, 4])
        XCTAssertEqual(y2, luma); XCTAssertEqual(u2, [1, 2]); XCTAssertEqual(v2, [3, 4])
    }

    func testWrongSizeAndOddDimensions() throws {
        let c = try PixelConverter(width: 4, height: 2, from: .yuyv)
        XCTAssertThrowsError(try [UInt8](repeating: 0, count: 15).withUnsafeBytes { try c.convert($0) }) {
            XCTAssertTrue(($0 as? MediaError)?.message.contains("got 15 bytes, a 4x2 yuyv frame is 16 bytes") == true, "\($0)")
        }
        XCTAssertThrowsError(try PixelConverter(width: 5, height: 2, from: .yuyv)) { XCTAssertTrue($0 is MediaError) }
    }
}
