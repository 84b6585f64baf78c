import ReelConfig
import XCTest

@testable import ReelWeb

final class PasswordTests: XCTestCase {
    func testAHashIsYescryptWithAFreshSaltAndVerifiesOnlyItsPassword() throws {
        let a = try Password.hash("correct horse")
        let b = try Password.hash("correct horse")
        XCTAssertTrue(a.hasPrefix("$y$"), a)
        XCTAssertNotEqual(a, b)
        XCTAssertTrue(Password.verify("correct horse", against: a))
        XCTAssertTrue(Password.verify("correct horse", against: b))
        XCTAssertFalse(Password.verify("correct horsE", against: a))
        XCTAssertFalse(Password.verify("", against: a))
        XCTAssertFalse(Password.verify("correct horse", against: "*"))
        XCTAssertFalse(Password.verify("correct horse", against: ""))
        XCTAssertFalse(Password.verify("correct horse", against: String(a.dropLast())))
    }

    func testAShadowStyleHashFromElsewhereVerifies() {
        // Python's crypt.crypt("reel", "$6$saltsalt$"): a SHA-512 hash as older /etc/shadow files hold.
        let sha512 = "$6$saltsalt$tmSQOs9k7Kgw7346F3LRQ4yapal2a.Xa0tNXd/QqcbGHEQWomQvbqtZhHoK21X9pIiCGzvyMfXmKEPHXODKeM/"
        XCTAssertTrue(Password.verify("reel", against: sha512))
        XCTAssertFalse(Password.verify("reeL", against: sha512))
    }

    func testConstantTimeComparison() {
        XCTAssertTrue(Password.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        XCTAssertFalse(Password.constantTimeEqual(Array("abc".utf8), Array("abd".utf8)))
        XCTAssertFalse(Password.constantTimeEqual(Array("abc".utf8), Array("abcd".utf8)))
        XCTAssertFalse(Password.constantTimeEqual([], Array("a".utf8)))
    }

    func testPasswordsAndFilesThatCannotBeUsedAreRefusedWithTheFix() {
        XCTAssertThrowsError(try Password.hash(""))
        XCTAssertThrowsError(try Password.hash("a\nb"))
        XCTAssertThrowsError(try Password.hash(String(repeating: "x", count: Password.maxBytes + 1)))
        XCTAssertEqual(try Password.parseFile("$y$j9T$abc$def\n", path: "/p"), "$y$j9T$abc$def")
        XCTAssertThrowsError(try Password.parseFile("hunter2\n", path: "/etc/reel/web-password")) { error in
            XCTAssertTrue("\(error)".contains("reel-web hash-password > /etc/reel/web-password"), "\(error)")
        }
        XCTAssertThrowsError(try Password.parseFile("root:$y$j9T$abc$def:19000::::::\n", path: "/p"))
    }

    func testTheDefaultRecordingsDirectoryIsReeldsOutputDirectory() throws {
        XCTAssertEqual(SettingKey.outputDir.defaultValue, .string(WebDefaults.recordingsDir))
    }
}
