import Glibc
import ReelCore
import ReelSystem

/// Turns the fragmented file `MP4Writer` wrote (ftyp, the 16-byte placeholder, a moov with empty
/// sample tables and an mvex, then moof/mdat pairs) into a standard MP4: ftyp, one 64-bit mdat,
/// one complete moov without mvex (the layout of FFmpeg 7.1's `hybrid_fragmented` and OBS 30.2's
/// hybrid MP4). Pure file I/O: it reads only the box headers, the moov and the moofs, never the
/// media, so its cost grows with the number of fragments, not the size of the file.
///
/// Steps, each leaving a file that plays:
/// - `parse`: read the fragment headers, build the new moov in memory (the file is only cut back to
///   its last complete fragment, as start-up recovery does).
/// - `moov`: append the new moov, fdatasync. The file is still the fragmented one; players use its
///   first moov (FFmpeg skips the second: "Found duplicated MOOV Atom").
/// - `mdat`: rewrite the placeholder as a 64-bit `mdat` header covering everything up to the new moov
///   (the first moov and every moof disappear into it), fdatasync. Now a standard MP4.
/// Chapters: the take markers (`TakeMarker`, `free` boxes `MP4Writer` puts between fragments) become
/// one chapter per take, in two forms, both as FFmpeg's movenc writes them: a QuickTime chapter
/// track (a disabled `text` track referenced by `tref/chap` from the video track, or the audio track
/// without video; one sample per take: 16-bit length, UTF-8 title, an `encd` box saying UTF-8),
/// whose samples go in a `free` box just before the new moov (inside the mdat once finished), and
/// a Nero `chpl` box in moov/udta (100 ns units). A marker past the end of the media (a take
/// begun just before a crash) gives no chapter; a damaged one is skipped (`Result.warnings`).
/// Running it again on a file stopped anywhere redoes what is missing (a trailing moov from an
/// interrupted run is cut off and rebuilt); a file whose placeholder already says `mdat` is left alone.
public enum MP4Finisher {
    public enum Step: String, Sendable, CaseIterable { case parse, moov, mdat }

    public struct Result: Sendable, Equatable {
        /// The file was already finished (its placeholder says mdat): nothing was written.
        public var alreadyFinished = false
        /// Where the new moov starts (the end of the media).
        public var moovOffset: Int64 = 0
        public var moovBytes = 0
        public var fragments = 0
        public var samples = 0
        /// Chapters written (one per take marker with media).
        public var chapters = 0
        /// What was skipped (damaged take markers), for the log.
        public var warnings: [String] = []
        /// The last step done (nil: none, stopped before writing).
        public var lastStep: Step?
    }

    /// Finishes `path` in place. `stopAfter` (tests) returns right after that step, as a crash there
    /// would leave the file. Throws with the file still playable as it was (fragmented) when it
    /// cannot be finished: no placeholder (written by an older Reel), a damaged box, an I/O error.
    @discardableResult
    public static func finish(path: String, stopAfter: Step? = nil) throws -> Result {
        let fd = Sys.eintrSafe { open(path, O_RDWR | O_CLOEXEC) }
        guard fd >= 0 else {
            let e = errno
            throw MediaError("cannot finish '\(path)': cannot open it: \(Errno.text(e))", systemError: e)
        }
        defer { close(fd) }
        return try Run(fd: fd, path: path).go(stopAfter: stopAfter)
    }

    /// `REEL_TEST_FINISH_STOP_AFTER=parse|moov|mdat` (test-only): the process ends with _exit(99)
    /// right after that step, as if killed there.
    public static let stopAfterVariable = TestHooks.finishStopAfterVariable
}

// MARK: - The run

private struct Run {
    typealias Step = MP4Finisher.Step
    let fd: Int32
    let path: String

    func fail(_ what: String) -> MediaError {
        MediaError("cannot finish '\(path)': \(what); it stays a fragmented MP4, which plays as it is")
    }

    func read(_ offset: Int64, _ count: Int) throws -> [UInt8] {
        var buf = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            // Safe: the pointer is into buf, which has count bytes.
            let n = buf.withUnsafeMutableBytes { b in Sys.eintrSafe { pread(fd, b.baseAddress! + done, count - done, off_t(offset) + off_t(done)) } }
            if n < 0 {
                let e = errno
                throw MediaError("cannot finish '\(path)': reading \(count) bytes at \(offset): \(Errno.text(e))", systemError: e)
            }
            if n == 0 { break }
            done += n
        }
        return Array(buf[0..<done])
    }

    func write(_ bytes: [UInt8], at offset: Int64) throws {
        if let e = bytes.withUnsafeBytes({ Sys.writeFully(fd, $0, at: offset) }).errno {
            throw MediaError("cannot finish '\(path)': writing \(bytes.count) bytes at \(offset): \(Errno.text(e)) (free space on the disk? the file stays fragmented and plays)", systemError: e)
        }
    }

    /// Syncs what `step` wrote (REEL_TEST_FINISH_HOLD stops here first, the step written, not synced).
    func sync(_ step: Step) throws {
        if TestHooks.finishHold == step.rawValue { TestHooks.holdForever(step.rawValue) }
        if Sys.eintrSafe({ fdatasync(fd) }) != 0 {
            let e = errno
            throw MediaError("cannot finish '\(path)': fdatasync: \(Errno.text(e)) (the disk failed? the file stays fragmented and plays)", systemError: e)
        }
    }

    /// A top-level box's header at `offset`: type, size (a box that runs to the end, size 0, gets
    /// its true size), header length.
    func header(_ offset: Int64, fileSize: Int64) throws -> MP4BoxHeader? {
        guard offset + 8 <= fileSize, var h = MP4BoxHeader(try read(offset, 16)) else { return nil }
        if h.size == 0 { h.size = fileSize - offset }
        return h
    }

    func stop(_ step: Step, _ stopAfter: Step?) -> Bool {
        if TestHooks.finishStopAfter == step.rawValue { _exit(99) }
        return step == stopAfter
    }

    func go(stopAfter: Step?) throws -> MP4Finisher.Result {
        var result = MP4Finisher.Result()
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw fail("fstat: \(Errno.current)") }
        let fileSize = Int64(st.st_size)
        guard let ftyp = try header(0, fileSize: fileSize), ftyp.type == "ftyp", ftyp.size >= 8 else {
            throw fail("it does not start with an ftyp box (not an MP4)")
        }
        let place = ftyp.size
        guard let ph = try header(place, fileSize: fileSize) else { throw fail("it ends after its ftyp box") }
        if ph.type == "mdat" {
            guard ph.headerLength == 16, ph.size >= 16, let moov = try header(place + ph.size, fileSize: fileSize),
                  moov.type == "moov", place + ph.size + moov.size <= fileSize else {
                throw fail("its mdat at \(place) is not followed by a complete moov box (damaged)")
            }
            result.alreadyFinished = true
            result.moovOffset = place + ph.size
            result.moovBytes = Int(moov.size)
            return result
        }
        guard ph.type == "free", ph.size == 16 else {
            throw fail("no 16-byte placeholder box after ftyp (found '\(ph.type)', \(ph.size) bytes: written by a Reel before the finisher)")
        }

        // (a) parse: the first moov, then complete moof/mdat pairs; anything after them (a moof cut
        // short, a moov appended by an interrupted run) is cut off.
        var offset = place + 16
        var moovBytes: [UInt8]? = nil
        var moofs: [(offset: Int64, bytes: [UInt8])] = []
        var pendingMoof: (offset: Int64, bytes: [UInt8])? = nil
        var dataEnd: Int64 = 0
        var markers: [TakeMarker] = []
        while let h = try header(offset, fileSize: fileSize), h.size >= Int64(h.headerLength), offset + h.size <= fileSize {
            if h.type == "moov" {
                if moovBytes != nil { break }       // a previous run's new moov: rebuilt below
                guard h.size < 64 << 20 else { throw fail("its moov box is \(h.size) bytes (damaged)") }
                moovBytes = try read(offset, Int(h.size))
                dataEnd = offset + h.size
            } else if h.type == "moof" {
                guard moovBytes != nil else { throw fail("a moof box before the moov box") }
                guard h.size < 64 << 20 else { throw fail("a moof box of \(h.size) bytes at \(offset) (damaged)") }
                pendingMoof = (offset, try read(offset, Int(h.size)))
            } else if h.type == "mdat" {
                if let m = pendingMoof { moofs.append(m); pendingMoof = nil; dataEnd = offset + h.size }
            } else if h.type == "free", moovBytes != nil, pendingMoof == nil, h.size >= Int64(h.headerLength + TakeMarker.signature.count),
                      TakeMarker.isMarker(body: try read(offset + Int64(h.headerLength), TakeMarker.signature.count)) {
                // A take marker: kept with the media (it ends up inside the mdat), read for its chapter.
                dataEnd = offset + h.size
                let bodyBytes = h.size - Int64(h.headerLength)
                do {
                    guard bodyBytes <= 4096 else { throw MediaError("a take marker of \(h.size) bytes (damaged: at most 4 KiB)") }
                    markers.append(try TakeMarker(body: try read(offset + Int64(h.headerLength), Int(bodyBytes))))
                } catch let e as MediaError {
                    result.warnings.append("'\(path)': skipped the take marker at \(offset): \(e.message); its take gets no chapter")
                }
            }
            offset += h.size
        }
        guard let moov = moovBytes else { throw fail("no complete moov box after the placeholder") }
        let built = try build(moov: moov, moofs: moofs, dataEnd: dataEnd, markers: markers)
        guard built.samples > 0 else { throw fail("it holds no complete fragment (no samples)") }
        result.fragments = moofs.count
        result.samples = built.samples
        result.chapters = built.chapters
        result.warnings += built.warnings
        // The chapter titles (if any) go first, then the moov: both after the last fragment.
        let tail = built.chapterText + built.moov
        result.moovOffset = dataEnd + Int64(built.chapterText.count)
        result.moovBytes = built.moov.count
        if stop(.parse, stopAfter) { result.lastStep = .parse; return result }

        // (b) the new moov after the last complete fragment, synced before the header points at it.
        if fileSize > dataEnd, ftruncate(fd, off_t(dataEnd)) != 0 {
            throw fail("cannot cut it back to its last complete fragment (\(dataEnd) bytes): \(Errno.current)")
        }
        do {
            try write(tail, at: dataEnd)
            try sync(.moov)
        } catch {
            // A moov written in part (a full disk) would be a box cut short at the end: cut it off.
            _ = ftruncate(fd, off_t(dataEnd))
            throw error
        }
        result.lastStep = .moov
        if stop(.moov, stopAfter) { return result }

        // (c) the placeholder becomes the mdat header: from it to the new moov.
        var mdat: [UInt8] = [0, 0, 0, 1] + Array("mdat".utf8)
        put64(&mdat, UInt64(result.moovOffset - place))
        try write(mdat, at: place)
        try sync(.mdat)
        result.lastStep = .mdat
        _ = stop(.mdat, stopAfter)
        return result
    }
}

// MARK: - Boxes

/// A box header as it starts the first 8 or 16 bytes given: type, size (0: the box runs to the end
/// of the file; a 64-bit size read when the 32-bit one is 1) and header length. nil when the bytes
/// are too few. Recovery (`Storage.partContents`) and the finisher both walk boxes with it.
public struct MP4BoxHeader: Sendable, Equatable {
    public var type: String
    public var size: Int64
    public var headerLength: Int

    public init?(_ b: [UInt8]) {
        guard b.count >= 8 else { return nil }
        type = fourCC(b, 4)
        size = Int64(be32(b, 0))
        headerLength = 8
        if size == 1 {
            guard b.count >= 16 else { return nil }
            size = Int64(bitPattern: be64(b, 8))
            headerLength = 16
        }
    }
}

private func be16(_ b: [UInt8], _ o: Int) -> UInt16 { UInt16(b[o]) << 8 | UInt16(b[o + 1]) }
private func be32(_ b: [UInt8], _ o: Int) -> UInt32 {
    UInt32(b[o]) << 24 | UInt32(b[o + 1]) << 16 | UInt32(b[o + 2]) << 8 | UInt32(b[o + 3])
}
private func be64(_ b: [UInt8], _ o: Int) -> UInt64 { UInt64(be32(b, o)) << 32 | UInt64(be32(b, o + 4)) }
private func fourCC(_ b: [UInt8], _ o: Int) -> String { String(decoding: b[o..<(o + 4)], as: UTF8.self) }
private func put32(_ b: inout [UInt8], _ v: UInt32) { b += [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
private func put64(_ b: inout [UInt8], _ v: UInt64) { put32(&b, UInt32(v >> 32)); put32(&b, UInt32(v & 0xffff_ffff)) }
private func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
    var b: [UInt8] = []
    b.reserveCapacity(body.count + 8)
    put32(&b, UInt32(body.count + 8)); b += Array(type.utf8); b += body
    return b
}
private func fullBox(_ type: String, version: UInt8, flags: UInt32 = 0, _ body: [UInt8]) -> [UInt8] {
    box(type, [version, UInt8(flags >> 16 & 0xff), UInt8(flags >> 8 & 0xff), UInt8(flags & 0xff)] + body)
}

/// A box inside a byte array: its type, the whole box and its body (after the header).
private struct Box {
    let type: String
    let whole: Range<Int>
    let body: Range<Int>
}

private struct Damaged: Error { let what: String }

/// The boxes in `b[range]`, in order.
private func children(_ b: [UInt8], _ range: Range<Int>) throws(Damaged) -> [Box] {
    var out: [Box] = []
    var o = range.lowerBound
    while o + 8 <= range.upperBound {
        var size = Int(be32(b, o)), hl = 8
        if size == 1 {
            guard o + 16 <= range.upperBound else { throw Damaged(what: "a box header cut short at \(o)") }
            size = Int(be64(b, o + 8)); hl = 16
        } else if size == 0 { size = range.upperBound - o }
        guard size >= hl, o + size <= range.upperBound else { throw Damaged(what: "a box of \(size) bytes at \(o) runs past its parent") }
        out.append(Box(type: fourCC(b, o + 4), whole: o..<(o + size), body: (o + hl)..<(o + size)))
        o += size
    }
    return out
}

private func child(_ b: [UInt8], _ parent: Box, _ type: String) throws(Damaged) -> Box? {
    try children(b, parent.body).first { $0.type == type }
}

// MARK: - Tracks and samples

private final class Track {
    let id: UInt32
    let trak: Box
    var mediaTimescale: UInt32 = 0
    var isVideo = false
    /// The original edit list: (segment duration in the movie timescale, media time, rate).
    var edits: [(duration: Int64, mediaTime: Int64, rate: UInt32)]? = nil
    var trex = (sdi: UInt32(1), duration: UInt32(0), size: UInt32(0), flags: UInt32(0))
    var durations: [UInt32] = []
    var sizes: [UInt32] = []
    var ctos: [Int32] = []
    var sync: [UInt32] = []            // 1-based sample numbers
    var chunks: [(offset: Int64, count: UInt32, sdi: UInt32)] = []
    var dtsEnd: Int64 = 0              // sum of the durations: the next sample's dts
    var presentationEnd: Int64 = Int64.min
    init(id: UInt32, trak: Box) { self.id = id; self.trak = trak }
}

extension Run {
    struct Built {
        var moov: [UInt8]
        var samples: Int
        /// The `free` box holding the chapter track's samples, written at dataEnd (empty: no chapters).
        var chapterText: [UInt8] = []
        var chapters = 0
        var warnings: [String] = []
    }

    func build(moov m: [UInt8], moofs: [(offset: Int64, bytes: [UInt8])], dataEnd: Int64, markers: [TakeMarker]) throws -> Built {
        do { return try buildOrThrow(moov: m, moofs: moofs, dataEnd: dataEnd, markers: markers) } catch let d as Damaged { throw fail(d.what) }
    }

    private func buildOrThrow(moov m: [UInt8], moofs: [(offset: Int64, bytes: [UInt8])], dataEnd: Int64, markers: [TakeMarker]) throws -> Built {
        let top = try children(m, 0..<m.count)
        guard let moovBox = top.first, moovBox.type == "moov" else { throw Damaged(what: "the moov box cannot be read") }
        let moovKids = try children(m, moovBox.body)
        guard let mvhd = moovKids.first(where: { $0.type == "mvhd" }) else { throw Damaged(what: "the moov has no mvhd") }
        let movieTimescale = be32(m, mvhd.body.lowerBound + 4 + (m[mvhd.body.lowerBound] == 1 ? 16 : 8))
        guard movieTimescale > 0 else { throw Damaged(what: "the mvhd's timescale is 0") }

        var tracks: [Track] = []
        for trak in moovKids where trak.type == "trak" {
            guard let tkhd = try child(m, trak, "tkhd") else { throw Damaged(what: "a trak without tkhd") }
            let v1 = m[tkhd.body.lowerBound] == 1
            let t = Track(id: be32(m, tkhd.body.lowerBound + 4 + (v1 ? 16 : 8)), trak: trak)
            guard let mdia = try child(m, trak, "mdia"), let mdhd = try child(m, mdia, "mdhd"),
                  let hdlr = try child(m, mdia, "hdlr") else { throw Damaged(what: "track \(t.id) has no mdia/mdhd/hdlr") }
            t.mediaTimescale = be32(m, mdhd.body.lowerBound + 4 + (m[mdhd.body.lowerBound] == 1 ? 16 : 8))
            guard t.mediaTimescale > 0 else { throw Damaged(what: "track \(t.id)'s mdhd timescale is 0") }
            t.isVideo = fourCC(m, hdlr.body.lowerBound + 8) == "vide"
            if let edts = try child(m, trak, "edts"), let elst = try child(m, edts, "elst") {
                let b = elst.body.lowerBound, v1 = m[b] == 1
                let n = Int(be32(m, b + 4))
                let entry = v1 ? 20 : 12
                guard b + 8 + n * entry <= elst.body.upperBound else { throw Damaged(what: "track \(t.id)'s elst is cut short") }
                t.edits = (0..<n).map { i in
                    let o = b + 8 + i * entry
                    return v1 ? (Int64(bitPattern: be64(m, o)), Int64(bitPattern: be64(m, o + 8)), be32(m, o + 16))
                              : (Int64(be32(m, o)), Int64(Int32(bitPattern: be32(m, o + 4))), be32(m, o + 8))
                }
            }
            tracks.append(t)
        }
        if let mvex = moovKids.first(where: { $0.type == "mvex" }) {
            for trex in try children(m, mvex.body) where trex.type == "trex" {
                let b = trex.body.lowerBound
                guard trex.body.count >= 24 else { throw Damaged(what: "a trex box is cut short") }
                if let t = tracks.first(where: { $0.id == be32(m, b + 4) }) {
                    t.trex = (be32(m, b + 8), be32(m, b + 12), be32(m, b + 16), be32(m, b + 20))
                }
            }
        }

        for (moofOffset, f) in moofs {
            try readFragment(f, at: moofOffset, tracks: tracks, dataEnd: dataEnd)
        }

        // Chapters on the clock of the video track (the audio track without video).
        var built = Built(moov: [], samples: tracks.reduce(0) { $0 + $1.sizes.count })
        var chapterTrak: [UInt8]? = nil, chpl: [UInt8]? = nil
        let clockTrack = tracks.first { $0.isVideo } ?? tracks.first
        let chapterID = (tracks.map(\.id).max() ?? 0) + 1
        if let clock = clockTrack, !markers.isEmpty {
            let list = chapters(markers, end: presentationEnd(clock, movieTimescale: movieTimescale), warnings: &built.warnings)
            if !list.isEmpty {
                let end = presentationEnd(clock, movieTimescale: movieTimescale)
                let text = chapterSamples(list)
                built.chapterText = box("free", text.bytes)
                chapterTrak = textTrak(id: chapterID, timescale: clock.mediaTimescale, movieTimescale: movieTimescale,
                                       starts: list.map(\.start), end: end, sizes: text.sizes, offset: dataEnd + 8)
                chpl = nero(list, timescale: clock.mediaTimescale)
                built.chapters = list.count
            }
        }

        // The new moov: mvhd, the tracks, everything else the first one had but mvex.
        var trakBoxes: [[UInt8]] = []
        var movieDuration: Int64 = 0
        for t in tracks {
            let (trak, duration) = try buildTrak(m, t, movieTimescale: movieTimescale,
                                                 chapterTrack: chapterTrak != nil && t === clockTrack ? chapterID : nil)
            trakBoxes.append(trak)
            movieDuration = max(movieDuration, duration)
        }
        var body: [UInt8] = []
        var nextTrak = 0
        let lastTrak = moovKids.lastIndex { $0.type == "trak" }
        for (i, k) in moovKids.enumerated() {
            switch k.type {
            case "mvhd":
                var h = timeHeader(m, k, duration: movieDuration, track: false)
                if chapterTrak != nil {
                    // next_track_ID, the mvhd's last field, past the chapter track.
                    let n = h.count - 4
                    let next = max(be32(h, n), chapterID + 1)
                    h.replaceSubrange(n..<(n + 4), with: [UInt8(next >> 24), UInt8(next >> 16 & 0xff), UInt8(next >> 8 & 0xff), UInt8(next & 0xff)])
                }
                body += h
            case "trak":
                body += trakBoxes[nextTrak]; nextTrak += 1
                if i == lastTrak, let c = chapterTrak { body += c }
            case "mvex": continue
            case "udta" where chpl != nil:
                body += box("udta", try children(m, k.body).filter { $0.type != "chpl" }.flatMap { m[$0.whole] } + chpl!)
                chpl = nil
            default: body += m[k.whole]
            }
        }
        if let chpl { body += box("udta", chpl) }
        built.moov = box("moov", body)
        return built
    }

    /// Where `t`'s presentation ends, in its media timescale (0 = the movie's start): the empty
    /// edits before its media, then its samples from the media edit's start.
    private func presentationEnd(_ t: Track, movieTimescale: UInt32) -> Int64 {
        let end = t.presentationEnd == Int64.min ? 0 : t.presentationEnd
        guard let e = t.edits, let media = e.lastIndex(where: { $0.mediaTime >= 0 }) else { return end }
        let empty = e[..<media].filter { $0.mediaTime == -1 }.reduce(Int64(0)) { $0 + $1.duration }
        return rescale(empty, Int64(t.mediaTimescale), Int64(movieTimescale)) + end - e[media].mediaTime
    }

    /// The chapters from the markers, in file order: each must start before `end` (a take begun
    /// just before the media ends has none) and after the one before (a marker repeated or out of
    /// order is skipped). A first chapter after 0 (the first take's marker was lost) gets an
    /// untitled chapter before it, so the chapters still cover the file from its start.
    private func chapters(_ markers: [TakeMarker], end: Int64, warnings: inout [String]) -> [(start: Int64, title: String)] {
        var out: [(start: Int64, title: String)] = []
        var lastIndex = 0
        for k in markers {
            guard k.start < end else { continue }   // no media of that take made it into the file
            if let last = out.last, k.start <= last.start || k.index <= lastIndex {
                warnings.append("'\(path)': skipped take \(k.index)'s marker (start \(k.start)): not after take \(lastIndex)'s (start \(last.start))")
                continue
            }
            out.append((k.start, k.label.isEmpty ? "Take \(k.index)" : k.label))
            lastIndex = k.index
        }
        if let first = out.first, first.start > 0 { out.insert((0, ""), at: 0) }
        return out
    }

    /// The chapter track's samples as FFmpeg's movenc writes them: 16-bit length, the UTF-8 title,
    /// an `encd` box (0x100: UTF-8).
    private func chapterSamples(_ list: [(start: Int64, title: String)]) -> (bytes: [UInt8], sizes: [UInt32]) {
        let encd: [UInt8] = [0, 0, 0, 12] + Array("encd".utf8) + [0, 0, 1, 0]
        var bytes: [UInt8] = [], sizes: [UInt32] = []
        for c in list {
            let title = Array(c.title.utf8)
            let sample = [UInt8(title.count >> 8), UInt8(title.count & 0xff)] + title + encd
            bytes += sample
            sizes.append(UInt32(sample.count))
        }
        return (bytes, sizes)
    }

    /// The QuickTime chapter track (FFmpeg movenc's layout): disabled, `text` handler, one chunk.
    private func textTrak(id: UInt32, timescale: UInt32, movieTimescale: UInt32, starts: [Int64], end: Int64,
                          sizes: [UInt32], offset: Int64) -> [UInt8] {
        let trackDuration = rescale(end, Int64(movieTimescale), Int64(timescale), rounding: .up)
        func times(_ duration: Int64, _ middle: [UInt8]) -> (version: UInt8, body: [UInt8]) {
            var b: [UInt8] = []
            let wide = duration > Int64(UInt32.max)
            if wide { put64(&b, 0); put64(&b, 0) } else { put32(&b, 0); put32(&b, 0) }   // created, modified
            b += middle
            if wide { put64(&b, UInt64(duration)) } else { put32(&b, UInt32(duration)) }
            return (wide ? 1 : 0, b)
        }
        var idField: [UInt8] = []; put32(&idField, id); put32(&idField, 0)
        var tkhd = times(trackDuration, idField)
        tkhd.body += [UInt8](repeating: 0, count: 8 + 2 + 2 + 2 + 2)   // reserved, layer, group, volume, reserved
        for v: UInt32 in [0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x4000_0000] { put32(&tkhd.body, v) }
        put32(&tkhd.body, 0); put32(&tkhd.body, 0)                     // width, height
        var tsField: [UInt8] = []; put32(&tsField, timescale)
        var mdhd = times(end, tsField)
        mdhd.body += [0x55, 0xc4, 0, 0]                                // 'und', quality
        let hdlr = fullBox("hdlr", version: 0, [0, 0, 0, 0] + Array("text".utf8) + [UInt8](repeating: 0, count: 12) + Array("SubtitleHandler".utf8) + [0])
        // gmhd: gmin and the undocumented `text` atom QuickTime wants for chapters (FFmpeg's bytes).
        var gmhdBody = fullBox("gmin", version: 0, [0, 0x40, 0x80, 0, 0x80, 0, 0x80, 0, 0, 0, 0, 0])
        var textAtom: [UInt8] = [0, 1]
        for v: UInt32 in [0, 0, 0, 1, 0, 0, 0, 0x4000] { put32(&textAtom, v) }
        textAtom += [0, 0]
        gmhdBody += box("text", textAtom)
        let dinf = box("dinf", fullBox("dref", version: 0, [0, 0, 0, 1] + fullBox("url ", version: 0, flags: 1, [])))
        // The sample entry: movenc's chapter_properties (text display flags, colours, the default font in `ftab`).
        let properties: [UInt8] = [0, 0, 0, 1] + [UInt8](repeating: 0, count: 19) + [1] + [UInt8](repeating: 0, count: 9)
            + [0x0d] + Array("ftab".utf8) + [0, 1, 0, 1, 0]
        let entry = box("text", [0, 0, 0, 0, 0, 0, 0, 1] + properties)
        var b: [UInt8] = []
        put32(&b, 1); let stsd = fullBox("stsd", version: 0, b + entry)
        var durations: [UInt32] = []
        for (i, s) in starts.enumerated() { durations.append(UInt32(clamping: (i + 1 < starts.count ? starts[i + 1] : end) - s)) }
        b = []; put32(&b, UInt32(durations.count)); for d in durations { put32(&b, 1); put32(&b, d) }
        let stts = fullBox("stts", version: 0, b)
        b = []; put32(&b, 1); put32(&b, 1); put32(&b, UInt32(sizes.count)); put32(&b, 1)
        let stsc = fullBox("stsc", version: 0, b)
        b = []; put32(&b, 0); put32(&b, UInt32(sizes.count)); for s in sizes { put32(&b, s) }
        let stsz = fullBox("stsz", version: 0, b)
        b = []; put32(&b, 1)
        let stco: [UInt8]
        if offset > Int64(UInt32.max) { put64(&b, UInt64(offset)); stco = fullBox("co64", version: 0, b) }
        else { put32(&b, UInt32(offset)); stco = fullBox("stco", version: 0, b) }
        let stbl = box("stbl", stsd + stts + stsc + stsz + stco)
        let minf = box("minf", box("gmhd", gmhdBody) + dinf + stbl)
        let mdia = box("mdia", fullBox("mdhd", version: mdhd.version, mdhd.body) + hdlr + minf)
        return box("trak", fullBox("tkhd", version: tkhd.version, flags: 0, tkhd.body) + mdia)
    }

    /// Nero's `chpl` (moov/udta), as FFmpeg writes it: version 1, at most 255 chapters, start times
    /// in 100 ns, titles of at most 255 bytes.
    private func nero(_ list: [(start: Int64, title: String)], timescale: UInt32) -> [UInt8] {
        var b: [UInt8] = [0, 0, 0, 0, UInt8(min(list.count, 255))]
        for c in list.prefix(255) {
            put64(&b, UInt64(rescale(c.start, 10_000_000, Int64(timescale))))
            let title = Array(TakeMarker.cut(c.title).utf8)
            b.append(UInt8(title.count)); b += title
        }
        return fullBox("chpl", version: 1, b)
    }

    private func readFragment(_ f: [UInt8], at moofOffset: Int64, tracks: [Track], dataEnd: Int64) throws {
        guard let moof = try children(f, 0..<f.count).first else { throw Damaged(what: "a moof at \(moofOffset) cannot be read") }
        var previousTrafEnd: Int64? = nil
        for traf in try children(f, moof.body) where traf.type == "traf" {
            let kids = try children(f, traf.body)
            guard let tfhd = kids.first(where: { $0.type == "tfhd" }) else { throw Damaged(what: "a traf without tfhd at \(moofOffset)") }
            var o = tfhd.body.lowerBound
            let flags = be32(f, o) & 0xff_ffff
            let id = be32(f, o + 4); o += 8
            guard let t = tracks.first(where: { $0.id == id }) else { throw Damaged(what: "a traf for track \(id), which the moov does not have") }
            var base = moofOffset
            if flags & 0x1 != 0 { base = Int64(bitPattern: be64(f, o)); o += 8 }
            else if flags & 0x20000 == 0, let end = previousTrafEnd { base = end }   // not default-base-is-moof: after the previous traf's data
            var sdi = t.trex.sdi, dDur = t.trex.duration, dSize = t.trex.size, dFlags = t.trex.flags
            if flags & 0x2 != 0 { sdi = be32(f, o); o += 4 }
            if flags & 0x8 != 0 { dDur = be32(f, o); o += 4 }
            if flags & 0x10 != 0 { dSize = be32(f, o); o += 4 }
            if flags & 0x20 != 0 { dFlags = be32(f, o); o += 4 }
            guard o <= tfhd.body.upperBound else { throw Damaged(what: "a tfhd at \(moofOffset) is cut short") }
            if flags & 0x10000 != 0 { continue }  // duration-is-empty: no samples
            if let tfdt = kids.first(where: { $0.type == "tfdt" }) {
                let b = tfdt.body.lowerBound
                let decodeTime = f[b] == 1 ? Int64(bitPattern: be64(f, b + 4)) : Int64(be32(f, b + 4))
                if decodeTime != t.dtsEnd {
                    // A gap: the previous sample lasts until this fragment (what FFmpeg shows, reading tfdt).
                    guard decodeTime > t.dtsEnd, !t.durations.isEmpty, decodeTime - t.dtsEnd <= Int64(UInt32.max - t.durations[t.durations.count - 1]) else {
                        throw Damaged(what: "track \(id)'s fragment at \(moofOffset) starts at \(decodeTime), before its previous samples end (\(t.dtsEnd))")
                    }
                    t.durations[t.durations.count - 1] += UInt32(decodeTime - t.dtsEnd)
                    t.dtsEnd = decodeTime
                }
            }
            var next = base
            var firstTrun = true
            for trun in kids where trun.type == "trun" {
                var p = trun.body.lowerBound
                let version = f[p], tf = be32(f, p) & 0xff_ffff
                let count = Int(be32(f, p + 4)); p += 8
                if tf & 0x1 != 0 { next = base + Int64(Int32(bitPattern: be32(f, p))); p += 4 }
                else if firstTrun { next = base }
                firstTrun = false
                var firstFlags: UInt32? = nil
                if tf & 0x4 != 0 { firstFlags = be32(f, p); p += 4 }
                let per = (tf & 0x100 != 0 ? 4 : 0) + (tf & 0x200 != 0 ? 4 : 0) + (tf & 0x400 != 0 ? 4 : 0) + (tf & 0x800 != 0 ? 4 : 0)
                guard p + count * per <= trun.body.upperBound else { throw Damaged(what: "a trun at \(moofOffset) is cut short") }
                guard count > 0 else { continue }
                let chunkStart = next
                for i in 0..<count {
                    var duration = dDur, size = dSize, sf = i == 0 ? (firstFlags ?? dFlags) : dFlags, cto: Int32 = 0
                    if tf & 0x100 != 0 { duration = be32(f, p); p += 4 }
                    if tf & 0x200 != 0 { size = be32(f, p); p += 4 }
                    if tf & 0x400 != 0 { let v = be32(f, p); p += 4; if !(i == 0 && firstFlags != nil) { sf = v } }
                    if tf & 0x800 != 0 {
                        let v = be32(f, p); p += 4
                        guard version == 1 || v <= UInt32(Int32.max) else { throw Damaged(what: "a composition offset of \(v) at \(moofOffset)") }
                        cto = Int32(bitPattern: v)
                    }
                    t.durations.append(duration)
                    t.sizes.append(size)
                    t.ctos.append(cto)
                    // Sync: not a non-sync sample and not one that depends on others (as FFmpeg reads trun flags).
                    if sf & 0x10000 == 0 && sf & 0x300_0000 != 0x100_0000 { t.sync.append(UInt32(t.sizes.count)) }
                    t.presentationEnd = max(t.presentationEnd, t.dtsEnd + Int64(cto) + Int64(duration))
                    t.dtsEnd += Int64(duration)
                    next += Int64(size)
                }
                guard chunkStart >= 0, next <= dataEnd else {
                    throw Damaged(what: "track \(id)'s samples at \(chunkStart)..<\(next) lie outside the file's fragments (..<\(dataEnd))")
                }
                t.chunks.append((chunkStart, UInt32(count), sdi))
            }
            previousTrafEnd = next
        }
    }

    /// mvhd, tkhd or mdhd with a new duration, version 1 when it needs 64 bits, the rest as it was.
    private func timeHeader(_ m: [UInt8], _ b: Box, duration: Int64, track: Bool) -> [UInt8] {
        let o = b.body.lowerBound, v1 = m[o] == 1
        let flags = be32(m, o) & 0xff_ffff
        let created = v1 ? be64(m, o + 4) : UInt64(be32(m, o + 4))
        let modified = v1 ? be64(m, o + 12) : UInt64(be32(m, o + 8))
        let p = o + (v1 ? 20 : 12)
        let afterMiddle = p + (track ? 8 : 4)
        let middle = Array(m[p..<afterMiddle])   // timescale, or track_ID + reserved
        let tail = Array(m[(afterMiddle + (v1 ? 8 : 4))..<b.body.upperBound])
        let wide = duration > Int64(UInt32.max) || created > UInt64(UInt32.max) || modified > UInt64(UInt32.max)
        var body: [UInt8] = []
        if wide { put64(&body, created); put64(&body, modified) } else { put32(&body, UInt32(created)); put32(&body, UInt32(modified)) }
        body += middle
        if wide { put64(&body, UInt64(duration)) } else { put32(&body, UInt32(duration)) }
        body += tail
        return fullBox(b.type, version: wide ? 1 : 0, flags: flags, body)
    }

    /// `chapterTrack`: the chapter track's id, referenced from this track (`tref/chap`).
    private func buildTrak(_ m: [UInt8], _ t: Track, movieTimescale: UInt32, chapterTrack: UInt32?) throws -> ([UInt8], Int64) {
        let mediaDuration = t.dtsEnd
        // The edit list: empty edits as they were; the media edit now lasts to the end of the
        // presentation (libavformat wrote 0 in the fragmented moov). Rounded up: never cuts a sample.
        var edits = t.edits
        var trackDuration = rescale(mediaDuration, Int64(movieTimescale), Int64(t.mediaTimescale), rounding: .up)
        if var e = edits, let last = e.lastIndex(where: { $0.mediaTime >= 0 }) {
            let end = t.presentationEnd == Int64.min ? 0 : t.presentationEnd
            e[last].duration = rescale(max(0, end - e[last].mediaTime), Int64(movieTimescale), Int64(t.mediaTimescale), rounding: .up)
            edits = e
            trackDuration = e.reduce(0) { $0 + $1.duration }
        }
        var kids = try children(m, t.trak.body)
        var chap: [UInt8] = []
        if let id = chapterTrack { put32(&chap, id); chap = box("chap", chap) }
        // The chapter reference: in the trak's tref (movenc puts it after tkhd and edts).
        let oldTref = kids.first { $0.type == "tref" }
        if !chap.isEmpty { kids.removeAll { $0.type == "tref" } }
        let trefAfter = kids.lastIndex { $0.type == "edts" } ?? kids.firstIndex { $0.type == "tkhd" }
        var body: [UInt8] = []
        for (i, k) in kids.enumerated() {
            defer {
                if !chap.isEmpty, i == trefAfter {
                    let others = (try? oldTref.map { try children(m, $0.body).filter { $0.type != "chap" }.flatMap { m[$0.whole] } }) ?? nil
                    body += box("tref", (others ?? []) + chap)
                }
            }
            switch k.type {
            case "tkhd": body += timeHeader(m, k, duration: trackDuration, track: true)
            case "edts":
                guard let e = edits else { body += m[k.whole]; continue }
                let wide = e.contains { $0.duration > Int64(UInt32.max) || $0.mediaTime > Int64(Int32.max) }
                var b: [UInt8] = []
                put32(&b, UInt32(e.count))
                for x in e {
                    if wide { put64(&b, UInt64(x.duration)); put64(&b, UInt64(bitPattern: x.mediaTime)) }
                    else { put32(&b, UInt32(x.duration)); put32(&b, UInt32(bitPattern: Int32(x.mediaTime))) }
                    put32(&b, x.rate)
                }
                body += box("edts", fullBox("elst", version: wide ? 1 : 0, b))
            case "mdia": body += try buildMdia(m, k, t, mediaDuration: mediaDuration)
            default: body += m[k.whole]
            }
        }
        return (box("trak", body), trackDuration)
    }

    private func buildMdia(_ m: [UInt8], _ mdia: Box, _ t: Track, mediaDuration: Int64) throws -> [UInt8] {
        var body: [UInt8] = []
        for k in try children(m, mdia.body) {
            switch k.type {
            case "mdhd": body += timeHeader(m, k, duration: mediaDuration, track: false)
            case "minf":
                var minf: [UInt8] = []
                for c in try children(m, k.body) {
                    if c.type == "stbl" {
                        guard let stsd = try child(m, c, "stsd") else { throw Damaged(what: "track \(t.id) has no stsd") }
                        minf += box("stbl", Array(m[stsd.whole]) + sampleTables(t))
                    } else { minf += m[c.whole] }
                }
                body += box("minf", minf)
            default: body += m[k.whole]
            }
        }
        return box("mdia", body)
    }

    /// stts, ctts (when any sample has a composition offset), stss (when any sample is not a sync
    /// sample), stsz, stsc, stco or co64.
    private func sampleTables(_ t: Track) -> [UInt8] {
        func runs<T: Equatable>(_ xs: [T]) -> [(count: UInt32, value: T)] {
            var out: [(count: UInt32, value: T)] = []
            for x in xs {
                if let last = out.last, last.value == x { out[out.count - 1].count += 1 } else { out.append((1, x)) }
            }
            return out
        }
        var out: [UInt8] = []
        var b: [UInt8] = []
        let stts = runs(t.durations)
        put32(&b, UInt32(stts.count))
        for r in stts { put32(&b, r.count); put32(&b, r.value) }
        out += fullBox("stts", version: 0, b)

        if t.ctos.contains(where: { $0 != 0 }) {
            let negative = t.ctos.contains { $0 < 0 }
            let ctts = runs(t.ctos)
            b = []; put32(&b, UInt32(ctts.count))
            for r in ctts { put32(&b, r.count); put32(&b, UInt32(bitPattern: r.value)) }
            out += fullBox("ctts", version: negative ? 1 : 0, b)
        }
        if t.sync.count < t.sizes.count {
            b = []; put32(&b, UInt32(t.sync.count))
            for s in t.sync { put32(&b, s) }
            out += fullBox("stss", version: 0, b)
        }

        b = []
        if let first = t.sizes.first, t.sizes.allSatisfy({ $0 == first }) {
            put32(&b, first); put32(&b, UInt32(t.sizes.count))
        } else {
            put32(&b, 0); put32(&b, UInt32(t.sizes.count))
            for s in t.sizes { put32(&b, s) }
        }
        out += fullBox("stsz", version: 0, b)

        var stsc: [(first: UInt32, count: UInt32, sdi: UInt32)] = []
        for (i, c) in t.chunks.enumerated() where stsc.last.map({ $0.count != c.count || $0.sdi != c.sdi }) ?? true {
            stsc.append((UInt32(i + 1), c.count, c.sdi))
        }
        b = []; put32(&b, UInt32(stsc.count))
        for e in stsc { put32(&b, e.first); put32(&b, e.count); put32(&b, e.sdi) }
        out += fullBox("stsc", version: 0, b)

        let wide = t.chunks.contains { $0.offset > Int64(UInt32.max) }
        b = []; put32(&b, UInt32(t.chunks.count))
        for c in t.chunks { if wide { put64(&b, UInt64(c.offset)) } else { put32(&b, UInt32(c.offset)) } }
        out += fullBox(wide ? "co64" : "stco", version: 0, b)
        return out
    }
}
