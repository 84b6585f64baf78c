import XCTest
final class ReelMediaTestsPlaceholder: XCTestCase { func testNothing() {} }
