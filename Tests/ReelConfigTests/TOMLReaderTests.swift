import Foundation
@testable import ReelConfig
import XCTest

/// TOMLDocument, reeld.toml's reader (scripts/toml_oracle.py compares it with Python's tomllib
/// over the fuzz corpus), and the config crashes `make fuzz` found.
final class TOMLReaderTests: XCTestCase {
    private func read(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> TOMLDocument? {
        do { return try TOMLDocument(parsing: text) } catch {
            XCTFail("refused: line \(error.line): \(error)", file: file, line: line)
            return nil
        }
    }

    private func refusal(_ text: String) -> TOMLDocument.SyntaxError? {
        do { _ = try TOMLDocument(parsing: text); return nil } catch { return error }
    }

    private func loadError(_ text: String) -> String? {
        var s = DaemonSettings()
        do { try s.apply(data: Data(text.utf8), path: "/etc/reel/reeld.toml"); return nil } catch { return error.description }
    }

    func testReadsStringsIntegersAndArraysWithTheirLines() throws {
        let doc = try XCTUnwrap(read("""
            # comment
            a = "x\\ty\\u00e9\\U0001F3A5" # after
            b = 'C:\\dir'
            c = \"\"\"
            one \\
              two\"\"\"\"
            d = -9_223_372_036_854_775_808
            e = 0xff
            f = [
              "/bin/x",  # a comment
              '--y',
            ]
            """))
        XCTAssertEqual(doc.keys, ["a", "b", "c", "d", "e", "f"])
        XCTAssertEqual(doc["a"]?.string, "x\ty\u{e9}\u{1F3A5}")
        XCTAssertEqual(doc["b"]?.string, "C:\\dir")
        XCTAssertEqual(doc["c"]?.string, "one two\"")
        XCTAssertEqual(doc["d"]?.int, Int(Int64.min))
        XCTAssertEqual(doc["e"]?.int, 255)
        XCTAssertEqual(doc["f"]?.array?.compactMap(\.string), ["/bin/x", "--y"])
        XCTAssertEqual(doc.line(of: "a"), 2)
        XCTAssertEqual(doc.line(of: "f"), 9)
    }

    func testRecognisesTheTypesReeldRefuses() throws {
        let doc = try XCTUnwrap(read("""
            f = 1.5e3
            g = -inf
            b = true
            dt = 1979-05-27 07:32:00Z
            d = 1979-05-27
            t = 07:32:00.25
            i = { x = 1, y.z = [1, "a"] }
            n.m = 1
            [tab]
            k = 1
            [[arr]]
            [[arr]]
            """))
        XCTAssertEqual(doc.keys.map { doc[$0]!.type }, [.double, .double, .bool, .dateTime, .date, .time, .table, .table, .table, .array])
        XCTAssertEqual(doc["f"]?.double, 1500)
        XCTAssertEqual(doc["arr"]?.array?.count, 2)
        XCTAssertNil(doc["k"], "a key under [tab] is not a root key")
        XCTAssertEqual(doc["tab"]?.tableKeys, ["k"])
        XCTAssertEqual(doc["i"]?.tableKeys, ["x", "y"])
        XCTAssertEqual(doc["n"]?.tableKeys, ["m"])
        XCTAssertEqual(loadError("crf = 2.5\n")?.hasPrefix("/etc/reel/reeld.toml:1: key 'crf': expected an integer (no quotes), found a floating-point number"), true)
        XCTAssertEqual(loadError("\n[video]\n"), "/etc/reel/reeld.toml:2: key 'video': expected a string (in quotes), found a table")
    }

    func testSyntaxErrorsNameTheLine() {
        let cases: [(String, Int, String)] = [
            ("crf = 20\nsize = \"640x360\n", 2, "not closed"),
            ("a = 1\nb = 2 3\n", 2, "expected the end of the line"),
            ("a = 007\n", 1, "is not a number"),
            ("a = 9223372036854775808\n", 1, "out of range"),
            ("a = \"\\q\"\n", 1, "unknown escape '\\q'"),
            ("a = 1\r\rb = 2\n", 1, "carriage return"),
            ("a = 1\n# bell \u{7}\n", 2, "control character U+0007 in a comment"),
            ("a = 1\na = 2\n", 2, "already defined on line 1"),
            ("a = 1\n[a]\n", 2, "already defined on line 1"),
            ("x = \"\"\"\nopen\n\n", 1, "not closed"),
            ("x = [\n1,\n", 1, "not closed"),
            ("x = {a = 1,}\n", 1, "cannot end with ','"),
            ("x = 1979-13-01\n", 1, "is not a date"),
            ("\n\nx\n", 3, "expected '=' after the key 'x'"),
        ]
        for (text, line, mentions) in cases {
            guard let e = refusal(text) else { XCTFail("accepted \(text.debugDescription)"); continue }
            XCTAssertEqual(e.line, line, "\(text.debugDescription): \(e)")
            XCTAssertTrue(e.description.contains(mentions), "\(text.debugDescription): \(e)")
        }
        XCTAssertNotNil(refusal(String(repeating: "[", count: 100_000)), "nesting is bounded, not a stack overflow")
        XCTAssertNotNil(refusal("a = " + String(repeating: "[", count: 100_000)), "nesting is bounded, not a stack overflow")
    }

    /// Inputs on which the TOMLKit/toml++ loader aborted reeld (each a file in Tests/fuzz/config).
    /// The date-time one passed the line filters main had added for toml++ and still aborted.
    func testMalformedFilesThatAbortedTomlPlusPlusAreSyntaxErrors() {
        for (text, line) in [("[[[video]\ndevice\"\n", 1), ("[=]\n", 1), ("crf = 20\n\t[\n", 2), ("\u{FEFF}  [ =]\n", 1),
                             ("log_level = 1979-05-27T%07:32:00Z\n", 1), ("# ocmment\n\narf = [[}'\"in_free = 3\u{8}", 3)] {
            let error = loadError(text)
            XCTAssertTrue(error?.hasPrefix("/etc/reel/reeld.toml:\(line): ") ?? false, "\(text.debugDescription): \(error ?? "accepted")")
        }
        XCTAssertEqual(loadError("log_level = 1979-05-27T%07:32:00Z\n"),
                       "/etc/reel/reeld.toml:1: key 'log_level': '1979-05-27T' is not a date or date-time such as 1979-05-27 or 1979-05-27T07:32:00Z (fix the TOML syntax; see the comments in the installed reeld.toml)")
    }

    /// TOMLKit cut keys at a NUL, and the loader then force-unwrapped a lookup of the cut key.
    func testKeyWithNulIsRefused() {
        XCTAssertEqual(loadError("\"crf\\u0000x\" = 1\n"), "/etc/reel/reeld.toml:1: a \\u0000 escape: a NUL cannot be in a setting (remove it)")
        // TOMLDocument itself keeps the whole key.
        XCTAssertEqual((try? TOMLDocument(parsing: "\"crf\\u0000x\" = 1\n"))?.keys, ["crf\u{0}x"])
    }

    /// 240 * D overflowed in the fps check (a trap) for D above 3.8e16.
    func testFpsWithHugeDenominatorIsRefused() {
        XCTAssertEqual(loadError("fps = \"1/100000000000000000\"\n")?.hasPrefix("/etc/reel/reeld.toml:1: key 'fps': '1/100000000000000000' is not N or N/D"), true)
        XCTAssertNil(loadError("fps = \"240000/1000\"\n"))
    }

    /// The old line finder split on Character "\n", which a CRLF never is: no line at all.
    func testLinesAreRightInCRLFFiles() {
        XCTAssertEqual(loadError("crf = 20\r\nkeyint = 99\r\n"), "/etc/reel/reeld.toml:2: key 'keyint': 99 is out of range (use 1 to 60 seconds)")
    }
}
