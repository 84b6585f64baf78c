import XCTest

@testable import ReelWeb

final class OriginCheckTests: XCTestCase {
    func allows(_ method: String = "POST", origin: String? = nil, referer: String? = nil, host: String? = "booth:8080",
                scheme: String = "http", extra: [String] = []) -> Bool {
        OriginCheck.allows(method: method, origin: origin, referer: referer, host: host, scheme: scheme, extra: extra)
    }

    func testSameOriginPassesAndOtherOriginsAreRefused() {
        XCTAssertTrue(allows(origin: "http://booth:8080"))
        XCTAssertTrue(allows(origin: "HTTP://Booth:8080"))
        XCTAssertFalse(allows(origin: "http://evil.example"))
        XCTAssertFalse(allows(origin: "http://booth:8081"))
        XCTAssertFalse(allows(origin: "https://booth:8080"))  // another scheme is another origin
        XCTAssertFalse(allows(origin: "null"))
        XCTAssertFalse(allows(origin: "http://booth:8080.evil.example"))
        XCTAssertFalse(allows(origin: "http://evil@booth:8080"))
    }

    func testWithoutOriginTheRefererDecidesAndWithNeitherItIsRefused() {
        XCTAssertTrue(allows(referer: "http://booth:8080/some/page?x=1"))
        XCTAssertFalse(allows(referer: "http://evil.example/booth:8080"))
        XCTAssertFalse(allows())
        XCTAssertFalse(allows(origin: "http://booth:8080", host: nil))
    }

    func testReadingNeedsNoOriginAndEveryStateChangingMethodIsChecked() {
        XCTAssertTrue(allows("GET"))
        XCTAssertTrue(allows("HEAD", origin: "http://evil.example"))
        for m in ["POST", "PUT", "PATCH", "DELETE", "post"] { XCTAssertFalse(allows(m, origin: "http://evil.example"), m) }
    }

    func testExtraOriginsAndDefaultPortsAndTheTLSScheme() {
        XCTAssertTrue(allows(origin: "https://booth.example", extra: ["https://booth.example:443/"]))
        XCTAssertTrue(allows(origin: "http://booth", host: "booth:80"))
        XCTAssertTrue(allows(origin: "https://booth:8080", scheme: "https"))
        XCTAssertTrue(allows(origin: "http://[::1]:8080", host: "[::1]:8080"))
        XCTAssertNil(OriginCheck.normalize("ftp://booth"))
        XCTAssertNil(OriginCheck.normalize("http://"))
        XCTAssertEqual(OriginCheck.origin(ofURL: "https://a.b:9/x#y"), "https://a.b:9")
    }
}
