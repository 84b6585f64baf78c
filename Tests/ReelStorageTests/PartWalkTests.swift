import ReelMedia
@testable import ReelStorage
import XCTest

/// `PartWalk` on bytes in memory: what recovery may do to each shape of `.part`.
final class PartWalkTests: XCTestCase {
    private func contents(_ b: [UInt8]) throws -> PartContents {
        try PartWalk(size: Int64(b.count)) { offset, count in
            guard offset >= 0, offset < Int64(b.count) else { return [] }
            return Array(b[Int(offset)..<min(b.count, Int(offset) + count)])
        }.contents()
    }

    private func isDamaged(_ c: PartContents) -> Bool { if case .damaged = c { return true }; return false }
    private func isNotReels(_ c: PartContents) -> Bool { if case .notReels = c { return true }; return false }

    /// The signature `MP4Writer` writes is the one these tests (and recovery) read.
    func testTheWritersSignatureIsTheOneOnDisk() {
        XCTAssertEqual(PartSignature.box, PartBytes.signature)
        XCTAssertEqual(PartSignature.version(of: PartBytes.signature), 1)
        XCTAssertEqual(MP4Writer.afterFtyp, PartBytes.placeholder + PartBytes.signature)
    }

    /// Complete fragments are kept; what follows the last one is cut only when it is the start
    /// of a fragment (or take marker) as Reel writes them, running to the end of the file.
    func testOnlyAnIncompleteFragmentAtTheEndIsDropped() throws {
        let whole = PartBytes.head + PartBytes.marker(1) + PartBytes.fragment(1) + PartBytes.fragment(2)
        let n = Int64(whole.count)
        XCTAssertEqual(try contents(whole), .playable(keep: n, fragments: 2))
        XCTAssertEqual(try contents(whole + PartBytes.marker(2)), .playable(keep: n + Int64(PartBytes.marker(2).count), fragments: 2),
                       "a marker after the last fragment is kept")
        let next = PartBytes.fragment(3)
        for cut in [3, 8, 30, PartBytes.moof(3).count, PartBytes.moof(3).count + 5, PartBytes.moof(3).count + 8, next.count - 1] {
            XCTAssertEqual(try contents(whole + Array(next.prefix(cut))), .playable(keep: n, fragments: 2), "fragment cut after \(cut) bytes")
        }
        XCTAssertEqual(try contents(whole + Array(PartBytes.marker(2).prefix(12))), .playable(keep: n, fragments: 2), "a marker cut short")
        // The finisher's chapter titles and new moov from a run that did not end: it redoes them.
        let tail = PartBytes.box("free", 20) + PartBytes.box("moov", 200)
        XCTAssertEqual(try contents(whole + tail), .playable(keep: n, fragments: 2))
        XCTAssertEqual(try contents(whole + Array(tail.prefix(60))), .playable(keep: n, fragments: 2))
        // Finished, not renamed: the placeholder is the mdat header over the signature and fragments.
        let media = PartBytes.signature + PartBytes.moov + PartBytes.fragment(1)
        let mdat = PartBytes.be32(1) + Array("mdat".utf8) + [0, 0, 0, 0] + PartBytes.be32(16 + media.count)
        XCTAssertEqual(try contents(PartBytes.ftyp + mdat + media + PartBytes.box("moov", 300)), .finished)
        XCTAssertTrue(isDamaged(try contents(PartBytes.ftyp + mdat + media + Array(PartBytes.box("moov", 300).prefix(100)))))
    }

    /// A moov not of the shape libavformat writes (what the finisher would copy into the
    /// finished file): damaged.
    func testAMoovOfAnotherShapeIsDamaged() throws {
        let moov = PartBytes.moov
        func swapped(_ from: String, _ to: String, duplicate: Bool = false) -> [UInt8] {
            var m = moov
            let at = (0..<(m.count - 4)).first { String(decoding: m[$0..<($0 + 4)], as: UTF8.self) == from }! - 4
            if duplicate {
                let size = Int(PartBytesRead.be32(m, at))
                m.insert(contentsOf: m[at..<(at + size)], at: at + size)
                // The containers around it grow: every box before it whose end lies past it.
                var o = 0
                while o < at {
                    let s = Int(PartBytesRead.be32(m, o))
                    if o + s > at { RecoveryMutationTests.put32(&m, o, UInt32(s + size)); o += 8 } else { o += s }
                }
            } else { m.replaceSubrange((at + 4)..<(at + 8), with: Array(to.utf8)) }
            return m
        }
        XCTAssertEqual(try contents(PartBytes.ftyp + PartBytes.placeholder + PartBytes.signature + moov + PartBytes.fragment(1)),
                       .playable(keep: Int64((PartBytes.head + PartBytes.fragment(1)).count), fragments: 1))
        for (m, what) in [(swapped("stbl", "trun"), "stbl renamed trun"), (swapped("mdhd", "", duplicate: true), "two mdhd"),
                          (swapped("mdia", "", duplicate: true), "two mdia"), (swapped("mvhd", "mvhx"), "no mvhd")] {
            XCTAssertTrue(isDamaged(try contents(PartBytes.ftyp + PartBytes.placeholder + PartBytes.signature + m + PartBytes.fragment(1))), what)
        }
        var v1 = moov
        let mvhd = (0..<(v1.count - 4)).first { String(decoding: v1[$0..<($0 + 4)], as: UTF8.self) == "mvhd" }!
        v1[mvhd + 4] = 1  // version 1 in a version 0 body
        XCTAssertTrue(isDamaged(try contents(PartBytes.ftyp + PartBytes.placeholder + PartBytes.signature + v1 + PartBytes.fragment(1))), "mvhd version")
    }

    /// A box type that is not printable ASCII is named as the finisher names it (`readFourCC`:
    /// printable ASCII as it is, any other byte as \xHH), in the moov as at the top level: no
    /// control character from the file reaches a message or the journal.
    func testADamagedBoxTypeIsNamedInPlainText() throws {
        let escape: [UInt8] = [0x1b, 0x5b, 0x32, 0x4a]  // ESC [ 2 J: clears a terminal
        var moov = PartBytes.moov
        let stbl = (0..<(moov.count - 4)).first { String(decoding: moov[$0..<($0 + 4)], as: UTF8.self) == "stbl" }!
        moov.replaceSubrange(stbl..<(stbl + 4), with: escape)
        let topLevel = PartBytes.head + PartBytes.fragment(1) + PartBytes.be32(16) + [0xff, 0xfe, 0x61, 0x62] + [UInt8](repeating: 0, count: 8)
        for (bytes, shown) in [(PartBytes.ftyp + PartBytes.placeholder + PartBytes.signature + moov + PartBytes.fragment(1), "\\x1b[2J"),
                               (topLevel, "\\xff\\xfeab")] {
            guard case let .damaged(why) = try contents(bytes) else { XCTFail("not damaged: \(shown)"); continue }
            XCTAssertTrue(why.utf8.allSatisfy { (0x20...0x7e).contains($0) }, "not plain text: \(why.debugDescription)")
            XCTAssertTrue(why.contains("'\(shown)'"), why)
        }
    }

    /// Nothing after the pre-fragment boxes: nothing recorded.
    func testReelsPartWithNothingRecordedIsNoMedia() throws {
        XCTAssertEqual(try contents(PartBytes.head), .noMedia)
        XCTAssertEqual(try contents(Array(PartBytes.head.dropLast(30))), .noMedia, "cut inside the moov")
        XCTAssertEqual(try contents(PartBytes.head + Array(PartBytes.fragment(1).prefix(300))), .noMedia, "first fragment cut short")
        XCTAssertEqual(try contents(PartBytes.head + PartBytes.marker(1)), .noMedia, "a take marker but no media")
    }

    /// Without the signature, nothing is Reel's: the old layout, anyone's MP4, no bytes, junk.
    func testWithoutTheSignatureNothingIsReels() throws {
        for (b, what) in [([UInt8](), "empty"), (Array(PartBytes.ftyp.prefix(5)), "cut in ftyp"),
                          (PartBytes.ftyp + PartBytes.placeholder + PartBytes.moov + PartBytes.fragment(1), "a Reel before signatures"),
                          (PartBytes.ftyp + PartBytes.box("free", 0) + PartBytes.box("moov", 600) + PartBytes.box("mdat", 50), "moov first"),
                          (PartBytes.ftyp + PartBytes.placeholder + Array(PartBytes.signature.prefix(12)), "signature cut short"),
                          (Array("hello, world, this is text".utf8), "text")] {
            XCTAssertTrue(isNotReels(try contents(b)), what)
        }
        var newer = PartBytes.head
        newer[PartBytes.ftyp.count + 16 + 16] = 2
        XCTAssertTrue(isNotReels(try contents(newer)), "a newer signature")
        let hostile = PartBytes.be32(8) + Array("ftyp".utf8) + PartBytes.be32(1) + Array("free".utf8) + [0x7f] + [UInt8](repeating: 0xff, count: 7)
        XCTAssertTrue(isNotReels(try contents(hostile)))
    }

    /// Reel's, but not as Reel writes it: damaged, never cut. Sizes anywhere up to 2^64-1, counts
    /// up to 2^32-1, a box in the middle that runs past the end.
    func testDamageInTheMiddleIsNeverTakenForAnIncompleteEnd() throws {
        let head = PartBytes.head + PartBytes.fragment(1)
        let rest = PartBytes.fragment(3) + PartBytes.fragment(4)
        var cases: [([UInt8], String)] = []
        for size in [0, 1, 7, 0xffff_ffff] {
            var f = PartBytes.fragment(2)
            f[0..<4] = ArraySlice(PartBytes.be32(size))
            cases.append((f, "moof size \(size)"))
        }
        for big: UInt64 in [0x7fff_ffff_ffff_ffff, 0xffff_ffff_ffff_ffff, 1 << 40] {
            var m = PartBytes.mdat(2)
            m = PartBytes.be32(1) + Array("mdat".utf8) + (0..<8).map { UInt8(truncatingIfNeeded: big >> (56 - 8 * UInt64($0))) } + Array(m.dropFirst(8))
            cases.append((PartBytes.moof(2) + m, "mdat 64-bit size \(big)"))
        }
        var longer = PartBytes.mdat(2)
        longer[0..<4] = ArraySlice(PartBytes.be32(longer.count + 1))
        cases.append((PartBytes.moof(2) + longer, "mdat one byte longer than its samples"))
        cases.append((PartBytes.moof(2, count: 0xffff_ffff) + PartBytes.mdat(2), "trun count 2^32-1"))
        cases.append((PartBytes.moof(2, samples: [300, 200, 400]) + PartBytes.mdat(2), "sample sizes not the mdat's"))
        cases.append((PartBytes.box("mdat", 100), "an mdat without moof"))
        cases.append((PartBytes.box("uuid", 100), "a box Reel does not write"))
        cases.append((PartBytes.box("free", 100), "a free box that is no marker"))
        cases.append((PartBytes.moof(2) + PartBytes.moof(3) + PartBytes.mdat(3), "a moof without its mdat"))
        // Two tracks whose samples leave a gap in the mdat (a sample size made smaller).
        let moofSize = 8 + 16 + 2 * (8 + 16 + 8 + 12 + 8)
        func traf(_ track: Int, _ at: Int, _ size: Int) -> [UInt8] {
            PartBytes.box("traf", body: PartBytes.box("tfhd", body: [0, 2, 0, 0] + PartBytes.be32(track))
                + PartBytes.box("trun", body: [0, 0, 2, 1] + PartBytes.be32(2) + PartBytes.be32(at) + PartBytes.be32(size) + PartBytes.be32(100)))
        }
        let twoTracks = { (first: Int) in
            PartBytes.box("moof", body: PartBytes.box("mfhd", body: [0, 0, 0, 0] + PartBytes.be32(2)) + traf(1, moofSize + 8, first) + traf(2, moofSize + 8 + 300, 100))
        }
        XCTAssertEqual(twoTracks(200).count, moofSize)
        XCTAssertEqual(try contents(head + twoTracks(200) + PartBytes.box("mdat", 500) + rest), .playable(keep: Int64((head + twoTracks(200) + PartBytes.box("mdat", 500) + rest).count), fragments: 4))
        cases.append((twoTracks(150) + PartBytes.box("mdat", 500), "a gap between two tracks' samples"))
        cases.append((twoTracks(250) + PartBytes.box("mdat", 500), "two tracks' samples overlapping"))
        for (middle, what) in cases {
            XCTAssertTrue(isDamaged(try contents(head + middle + rest)), what)
        }
        // A moof claiming to run to past the end, with more fragments after its real end.
        var huge = PartBytes.fragment(2)
        huge[0..<4] = ArraySlice(PartBytes.be32(1 << 30))
        XCTAssertTrue(isDamaged(try contents(head + huge + rest)), "a moof size past the end")
    }
}
