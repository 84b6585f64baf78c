import XCTest
final class ReelControlTestsPlaceholder: XCTestCase { func testNothing() {} }
