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
/// - `parse`: walk the top-level boxes and read every fragment's header, build the new moov in
///   memory. Nothing is written before everything has been checked: a file that cannot be finished
///   (`MP4FinishError`) is left byte for byte as it was.
/// - `moov`: cut the file back to its last complete fragment (what lies beyond was checked to be
///   only what Reel leaves there: a fragment cut short, or the moov of an interrupted run), append
///   the new moov, fdatasync. The file is still the fragmented one; players use its first moov
///   (FFmpeg skips the second: "Found duplicated MOOV Atom").
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
///
/// Hostile or damaged files. Every size, count and offset read from the file is checked before it
/// is used (checked arithmetic, a bounds check before every read, no allocation sized by a count
/// before the count is checked against the bytes that hold it), and anything out of place is an
/// `MP4FinishError` naming the box and its offset. What the finisher accepts is what `MP4Writer`
/// writes: after the placeholder one moov, then moof/mdat pairs with `free` boxes (take markers)
/// between them, and at the end only a fragment cut short or an interrupted run's `free` + moov.
/// A moof's samples must lie inside the mdat right after it, and every sample holds at least one
/// byte, so a sample count can never exceed the media bytes present.
///
/// Memory and time are bounded by the file's size, and memory also by `memoryBudget`. One moof is
/// in memory at a time (at most `maxMoofBytes`) with the first moov (at most `maxMoovBytes`); per
/// track the finisher keeps 4 bytes per sample (its size, for stsz), run-length lists for durations,
/// composition offsets and sync flags (with B-frames about one composition run per video sample),
/// and 16 bytes per fragment and track (its chunk); the new moov (about 4 bytes per sample plus 8
/// per composition run and 4 per chunk) is built in place in one array. Sample counts cannot exceed
/// the media bytes present (checked), so all of it is linear in the file's size. Measured on
/// synthetic recordings with the sample and fragment counts of 720p30 + 48 kHz AAC in 0.5 s
/// fragments (docs/RELIABILITY.md, release build, the program's own 44 MB included): one day,
/// 6.6 M samples, a 51.6 MB moov: 3.2 s of CPU, peak RSS 198 MB; three days, 19.9 M samples: 8.9 s,
/// 503 MB; one week, 46.5 M samples, a 361 MB moov: 18.7 s and 1.13 GB without a budget, so the
/// default budget (384 MiB of estimated tables and moov) refuses it after 3.3 days of it, at
/// 263 MB. Time is one pass over the box headers and the moofs (a few bytes per sample), never the media.
public enum MP4Finisher {
    public enum Step: String, Sendable, CaseIterable { case parse, moov, mdat }

    /// The first moov (Reel's is about 2 kB) and any one moof (Reel's, 0.5 s of media: a few kB)
    /// are read whole; larger ones are refused as damaged.
    public static let maxMoovBytes: Int64 = 64 << 20
    public static let maxMoofBytes: Int64 = 64 << 20

    /// The memory the finisher may use for one file's sample tables and new moov (estimated as it
    /// reads the fragments, from what it holds): a file that would need more is refused before it
    /// takes more (`.unsupported`, left as it was: a fragmented MP4 plays). 384 MiB is half of the
    /// 768 MiB MemoryMax= issue 22 gives reeld.service; it holds about 22 M samples, 3.3 days at
    /// 30 fps with 48 kHz AAC; three days finished at a peak RSS of 503 MB, the program's own 44 MB
    /// included (docs/RELIABILITY.md).
    public static let defaultMemoryBudget = 384 << 20

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
        public init() {}
    }

    /// Finishes `path` in place. `stopAfter` (tests) returns right after that step, as a crash there
    /// would leave the file. Throws `MP4FinishError`: `.damaged` and `.unsupported` with the file
    /// byte for byte as it was; `.system` when a read, write or sync failed (a failed write leaves
    /// the file cut back to its last complete fragment, which plays).
    @discardableResult
    public static func finish(path: String, stopAfter: Step? = nil, memoryBudget: Int = defaultMemoryBudget) throws(MP4FinishError) -> Result {
        let fd = Sys.eintrSafe { open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW) }
        guard fd >= 0 else {
            throw MP4FinishError(.system(errno), path: path, problem: "cannot open it")
        }
        defer { close(fd) }
        return try Run(fd: fd, path: path, memoryBudget: memoryBudget).go(stopAfter: stopAfter)
    }

    /// `REEL_TEST_FINISH_STOP_AFTER=parse|moov|mdat` (test-only): the process ends with _exit(99)
    /// right after that step, as if killed there.
    public static let stopAfterVariable = TestHooks.finishStopAfterVariable
}

/// Why `MP4Finisher` did not finish a file, naming the file and, for damage, the box and its offset:
/// `cannot finish /x/a.mp4.part: trun at offset 1234 claims 4294967295 samples but holds 96 bytes
/// (the file is damaged; it is left as it was)`.
public struct MP4FinishError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Equatable, Sendable {
        /// A size, count, offset or field that cannot be right, a box cut short in the middle of the
        /// file, a box twice, a box Reel does not write: nothing was written.
        case damaged
        /// Well formed, but not what the finisher makes a standard MP4 of (no placeholder: another
        /// program's MP4 or an older Reel's; no complete fragment): nothing was written.
        case unsupported
        /// A system call failed with this errno (ENOSPC, EIO, ...).
        case system(Int32)
    }
    public let kind: Kind
    public let path: String
    /// The four-character type of the box at fault and its offset in the file (nil: not one box's fault).
    public let box: String?
    public let offset: Int64?
    /// What is wrong, without the file's name: "claims 4294967295 samples but holds 96 bytes".
    public let problem: String

    public init(_ kind: Kind, path: String, box: String? = nil, offset: Int64? = nil, problem: String) {
        self.kind = kind; self.path = path; self.box = box; self.offset = offset; self.problem = problem
    }

    /// The errno of a `.system` error (as `MediaError.systemError`).
    public var systemError: Int32? { if case let .system(e) = kind { e } else { nil } }

    public var description: String {
        let at = box.map { b in offset.map { "\(b) at offset \($0) " } ?? "\(b) " } ?? ""
        switch kind {
        case .damaged: return "cannot finish \(path): \(at)\(problem) (the file is damaged; it is left as it was)"
        case .unsupported: return "cannot finish \(path): \(at)\(problem) (it is left as it was)"
        case .system(let e): return "cannot finish \(path): \(problem): \(Errno.text(e)) (\(Self.advice(e)))"
        }
    }

    static func advice(_ e: Int32) -> String {
        switch e {
        case ENOSPC, EDQUOT: "free space on the disk; the file is cut back to its last complete fragment, which plays"
        case EIO: "the disk failed? the file stays fragmented and plays up to its last complete fragment"
        case ENOENT: "is the file still there?"
        case EACCES, EPERM, EROFS: "can reeld write the file? see its owner and mode"
        case ELOOP: "a symbolic link: the finisher does not follow links"
        default: "the file stays fragmented and plays up to its last complete fragment"
        }
    }
}

// MARK: - Top-level box headers

/// A box header as it starts the first 8 or 16 bytes given: type, size (0: the box runs to the end
/// of the file; a 64-bit size read when the 32-bit one is 1) and header length. nil when the bytes
/// are too few or a 64-bit size is past Int64.max. Recovery (`Storage.partContents`) and the
/// finisher both walk boxes with it; `place(_:at:fileSize:)` also checks the box against the file.
public struct MP4BoxHeader: Sendable, Equatable {
    public var type: String
    public var size: Int64
    public var headerLength: Int

    public init?(_ b: [UInt8]) {
        guard b.count >= 8 else { return nil }
        type = readFourCC(b, 4)
        size = Int64(be32(b, 0))
        headerLength = 8
        if size == 1 {
            guard b.count >= 16, be64(b, 8) <= UInt64(Int64.max) else { return nil }
            size = Int64(be64(b, 8))
            headerLength = 16
        }
    }

    /// Where the box ends when it starts at `offset`: nil if that overflows.
    public func end(from offset: Int64) -> Int64? {
        let (e, overflow) = offset.addingReportingOverflow(size)
        return overflow ? nil : e
    }

    /// A top-level box at `offset` in a file of `fileSize` bytes, given the (up to) 16 bytes there.
    public enum Placement: Sendable, Equatable {
        /// `offset` is the end of the file.
        case end
        /// A whole box inside the file (a size of 0, "to the end", is made the true size).
        case box(MP4BoxHeader)
        /// A box that runs past the end of the file (nil: its header itself is cut short), as the
        /// last box of a file cut short by a crash is.
        case cutShort(MP4BoxHeader?)
        /// Cannot be a box: a size smaller than its header, or a 64-bit size past Int64.max.
        case damaged(String)
    }

    public static func place(_ head: [UInt8], at offset: Int64, fileSize: Int64) -> Placement {
        guard offset >= 0, offset < fileSize else { return .end }
        guard head.count >= 8 else { return .cutShort(nil) }
        if be32(head, 0) == 1 {
            guard head.count >= 16 else { return .cutShort(nil) }
            guard be64(head, 8) <= UInt64(Int64.max) else { return .damaged("has a 64-bit size of \(be64(head, 8))") }
        }
        guard var h = MP4BoxHeader(head) else { return .cutShort(nil) }
        if h.size == 0 && h.headerLength == 8 { h.size = fileSize - offset }   // a 64-bit size of 0 is not "to the end"
        guard h.size >= Int64(h.headerLength) else {
            return .damaged("has a size of \(h.size), less than its \(h.headerLength)-byte header")
        }
        guard let end = h.end(from: offset), end <= fileSize else { return .cutShort(h) }
        return .box(h)
    }
}

// MARK: - The run

private struct Run {
    typealias Step = MP4Finisher.Step
    let fd: Int32
    let path: String
    let memoryBudget: Int

    func damaged(_ box: String?, _ offset: Int64?, _ what: String) -> MP4FinishError {
        MP4FinishError(.damaged, path: path, box: box, offset: offset, problem: what)
    }

    func unsupported(_ box: String?, _ offset: Int64?, _ what: String) -> MP4FinishError {
        MP4FinishError(.unsupported, path: path, box: box, offset: offset, problem: what)
    }

    /// Exactly `count` bytes at `offset` (the caller checked they lie inside the file; fewer means
    /// the file shrank meanwhile).
    func read(_ offset: Int64, _ count: Int) throws(MP4FinishError) -> [UInt8] {
        var buf = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            // Safe: the pointer is into buf, which has count bytes, and done < count.
            let n = buf.withUnsafeMutableBytes { b in Sys.eintrSafe { pread(fd, b.baseAddress! + done, count - done, off_t(offset) + off_t(done)) } }
            if n < 0 { throw MP4FinishError(.system(errno), path: path, problem: "reading \(count) bytes at \(offset)") }
            if n == 0 { throw MP4FinishError(.system(EIO), path: path, problem: "it ended at \(offset + Int64(done)) while reading \(count) bytes at \(offset) (did something cut it meanwhile?)") }
            done += n
        }
        return buf
    }

    func write(_ bytes: [UInt8], at offset: Int64) throws(MP4FinishError) {
        if let e = bytes.withUnsafeBytes({ Sys.writeFully(fd, $0, at: offset) }).errno {
            throw MP4FinishError(.system(e), path: path, problem: "writing \(bytes.count) bytes at \(offset)")
        }
    }

    /// Syncs what `step` wrote (REEL_TEST_FINISH_HOLD stops here first, the step written, not synced).
    func sync(_ step: Step) throws(MP4FinishError) {
        if TestHooks.finishHold == step.rawValue { TestHooks.holdForever(step.rawValue) }
        if Sys.eintrSafe({ fdatasync(fd) }) != 0 {
            throw MP4FinishError(.system(errno), path: path, problem: "fdatasync after the \(step.rawValue) step")
        }
    }

    /// The top-level box at `offset`.
    func header(_ offset: Int64, fileSize: Int64) throws(MP4FinishError) -> MP4BoxHeader.Placement {
        guard offset >= 0, offset < fileSize else { return .end }
        return MP4BoxHeader.place(try read(offset, Int(min(16, fileSize - offset))), at: offset, fileSize: fileSize)
    }

    func stop(_ step: Step, _ stopAfter: Step?) -> Bool {
        if TestHooks.finishStopAfter == step.rawValue { _exit(99) }
        return step == stopAfter
    }

    func go(stopAfter: Step?) throws(MP4FinishError) -> MP4Finisher.Result {
        var result = MP4Finisher.Result()
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw MP4FinishError(.system(errno), path: path, problem: "fstat") }
        guard st.st_mode & S_IFMT == S_IFREG else { throw unsupported(nil, nil, "it is not a regular file") }
        let fileSize = Int64(st.st_size)
        guard case let .box(ftyp) = try header(0, fileSize: fileSize), ftyp.type == "ftyp" else {
            throw unsupported(nil, nil, "it does not start with an ftyp box (not an MP4)")
        }
        let place = ftyp.size
        let ph: MP4BoxHeader
        switch try header(place, fileSize: fileSize) {
        case .box(let h): ph = h
        case .end, .cutShort(nil): throw unsupported(nil, nil, "it ends after its ftyp box")
        case .cutShort(let h?): throw damaged(h.type, place, "claims \(h.size) bytes but the file ends \(fileSize - place) bytes after its start")
        case .damaged(let why): throw damaged("box", place, why)
        }
        if ph.type == "mdat" {
            let moovAt = place + ph.size   // no overflow: .box ends inside the file
            guard ph.headerLength == 16, case let .box(moov) = try header(moovAt, fileSize: fileSize), moov.type == "moov" else {
                throw damaged("mdat", place, "is not followed by a complete moov box")
            }
            result.alreadyFinished = true
            result.moovOffset = moovAt
            result.moovBytes = Int(moov.size)
            return result
        }
        guard ph.type == "free", ph.size == 16 else {
            throw unsupported(ph.type, place, "is not the 16-byte placeholder box Reel writes after ftyp (\(ph.size) bytes: written by another program or a Reel before the finisher)")
        }

        // (a) parse: the first moov, then complete moof/mdat pairs (each moof read as its mdat
        // arrives, so one is in memory at a time); what lies past the last of them must be what a
        // crash or an interrupted run leaves (checked as the walk goes), and is cut off at (b).
        var offset = place + 16
        // Reel's signature (`PartSignature`, every .part since issue 22; one from before has none)
        // lies between the placeholder and the moov: skipped like the placeholder, nothing else is.
        let signatureBytes = Int64(PartSignature.box.count)
        if fileSize - offset >= signatureBytes, PartSignature.version(of: try read(offset, PartSignature.box.count)) != nil {
            offset += signatureBytes
        }
        var movie: Movie? = nil
        var pendingMoof: (offset: Int64, bytes: [UInt8])? = nil
        var dataEnd: Int64 = 0
        var markers: [TakeMarker] = []
        var fragments = 0
        walk: while true {
            let h: MP4BoxHeader
            switch try header(offset, fileSize: fileSize) {
            case .end: break walk
            case .cutShort(let c):
                // The last box, cut short by a crash: a fragment, or an interrupted run's moov.
                if let c, movie == nil ? c.type != "moov" : !["moof", "mdat", "moov", "free"].contains(c.type) {
                    throw damaged(c.type, offset, "claims \(c.size) bytes but the file ends \(fileSize - offset) bytes after its start, and it is not a box Reel writes last")
                }
                break walk
            case .damaged(let why): throw damaged("box", offset, why)
            case .box(let b): h = b
            }
            let end = offset + h.size   // inside the file (.box)
            if pendingMoof != nil, h.type != "mdat" {
                throw damaged(h.type, offset, "follows the moof at \(pendingMoof!.offset) where its mdat should be")
            }
            switch h.type {
            case "moov" where movie == nil:
                guard h.size <= MP4Finisher.maxMoovBytes else { throw damaged("moov", offset, "is \(h.size) bytes (Reel's is a few kB; at most \(MP4Finisher.maxMoovBytes))") }
                movie = try parseMovie(Bytes(b: try read(offset, Int(h.size)), base: offset), memoryBudget: memoryBudget)
                dataEnd = end
            case "moov":
                // An interrupted run's new moov: the last box, rebuilt below.
                guard end == fileSize else { throw damaged("moov", offset, "is a second moov box, and not the last box of the file") }
                break walk
            case "moof":
                guard movie != nil else { throw damaged("moof", offset, "comes before the moov box") }
                guard h.size <= MP4Finisher.maxMoofBytes else { throw damaged("moof", offset, "is \(h.size) bytes (at most \(MP4Finisher.maxMoofBytes))") }
                pendingMoof = (offset, try read(offset, Int(h.size)))
            case "mdat":
                guard let m = pendingMoof, let movie else { throw damaged("mdat", offset, "has no moof before it") }
                try movie.readFragment(Bytes(b: m.bytes, base: m.offset), media: (offset + Int64(h.headerLength))..<end, path: path)
                pendingMoof = nil
                fragments += 1
                dataEnd = end
            case "free", "skip":
                guard movie != nil else { throw damaged(h.type, offset, "comes before the moov box (Reel writes none there)") }
                let sig = TakeMarker.signature.count
                if h.type == "free", h.size >= Int64(h.headerLength + sig),
                   TakeMarker.isMarker(body: try read(offset + Int64(h.headerLength), sig)) {
                    // A take marker: kept with the media (it ends up inside the mdat), read for its chapter.
                    dataEnd = end
                    let bodyBytes = h.size - Int64(h.headerLength)
                    let skipped = { (why: String) in "'\(path)': skipped the take marker at offset \(offset): \(why); its take gets no chapter" }
                    if bodyBytes > 4096 {
                        result.warnings.append(skipped("a take marker of \(h.size) bytes (damaged: at most 4 KiB)"))
                    } else {
                        let body = try read(offset + Int64(h.headerLength), Int(bodyBytes))
                        do { markers.append(try TakeMarker(body: body)) } catch { result.warnings.append(skipped(error.message)) }
                    }
                }
            default:
                throw damaged(h.type, offset, "is not a box Reel writes at the top level of a recording")
            }
            offset = end
        }
        guard let movie else { throw unsupported(nil, nil, "it has no complete moov box after the placeholder") }
        let built = try movie.build(dataEnd: dataEnd, markers: markers, path: path)
        guard built.samples > 0 else { throw unsupported(nil, nil, "it holds no complete fragment (no samples)") }
        result.fragments = fragments
        result.samples = built.samples
        result.chapters = built.chapters
        result.warnings += built.warnings
        // The chapter titles (if any) go first, then the moov: both after the last fragment.
        result.moovOffset = dataEnd + Int64(built.chapterText.count)
        result.moovBytes = built.moov.count
        if stop(.parse, stopAfter) { result.lastStep = .parse; return result }

        // (b) the new moov after the last complete fragment, synced before the header points at it.
        if fileSize > dataEnd, ftruncate(fd, off_t(dataEnd)) != 0 {
            throw MP4FinishError(.system(errno), path: path, problem: "cutting it back to its last complete fragment (\(dataEnd) bytes)")
        }
        do throws(MP4FinishError) {
            try write(built.chapterText, at: dataEnd)
            try write(built.moov, at: result.moovOffset)
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

// MARK: - Bytes

private func be16(_ b: [UInt8], _ o: Int) -> UInt16 { UInt16(b[o]) << 8 | UInt16(b[o + 1]) }
private func be32(_ b: [UInt8], _ o: Int) -> UInt32 {
    UInt32(b[o]) << 24 | UInt32(b[o + 1]) << 16 | UInt32(b[o + 2]) << 8 | UInt32(b[o + 3])
}
private func be64(_ b: [UInt8], _ o: Int) -> UInt64 { UInt64(be32(b, o)) << 32 | UInt64(be32(b, o + 4)) }
/// A box type as text: printable ASCII as it is, any other byte as \xHH (a damaged type must not
/// put control characters or combining marks into a message or a log line).
private func readFourCC(_ b: [UInt8], _ o: Int) -> String {
    var s = ""
    for c in b[o..<(o + 4)] {
        if (0x20...0x7e).contains(c) && c != UInt8(ascii: "\\") { s.unicodeScalars.append(Unicode.Scalar(c)) }
        else { s += "\\x" + String(c, radix: 16, uppercase: false).leftPadded(to: 2) }
    }
    return s
}

private extension String {
    func leftPadded(to n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}
private func put32(_ b: inout [UInt8], _ v: UInt32) { b += [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
private func put64(_ b: inout [UInt8], _ v: UInt64) { put32(&b, UInt32(v >> 32)); put32(&b, UInt32(v & 0xffff_ffff)) }
/// A box; past 4 GiB with a 64-bit size (a moov that large is allowed by the format).
private func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
    var b: [UInt8] = []
    b.reserveCapacity(body.count + 16)
    if body.count + 8 <= Int(UInt32.max) { put32(&b, UInt32(body.count + 8)); b += Array(type.utf8) }
    else { put32(&b, 1); b += Array(type.utf8); put64(&b, UInt64(body.count + 16)) }
    b += body
    return b
}
private func fullBox(_ type: String, version: UInt8, flags: UInt32 = 0, _ body: [UInt8]) -> [UInt8] {
    box(type, [version, UInt8(flags >> 16 & 0xff), UInt8(flags >> 8 & 0xff), UInt8(flags & 0xff)] + body)
}

extension Array where Element == UInt8 {
    /// Appends a box (a full box with `version`) whose body `fill` appends in place, then writes its
    /// size in front: the new moov's tables are built once, in the moov, never copied into each
    /// parent box in turn. Past 4 GiB the size is a 64-bit one (8 bytes moved in, rare).
    fileprivate mutating func appendBox<E: Error>(_ type: String, version: UInt8? = nil, flags: UInt32 = 0,
                                                  _ fill: (inout [UInt8]) throws(E) -> Void) throws(E) {
        let start = count
        append(contentsOf: [0, 0, 0, 0])
        append(contentsOf: type.utf8)
        if let version { append(contentsOf: [version, UInt8(flags >> 16 & 0xff), UInt8(flags >> 8 & 0xff), UInt8(flags & 0xff)]) }
        try fill(&self)
        var size = UInt64(count - start)
        if size > UInt64(UInt32.max) {
            size += 8
            var wide: [UInt8] = []
            put64(&wide, size)
            insert(contentsOf: wide, at: start + 8)
            self[start + 3] = 1
            return
        }
        self[start] = UInt8(size >> 24); self[start + 1] = UInt8(size >> 16 & 0xff)
        self[start + 2] = UInt8(size >> 8 & 0xff); self[start + 3] = UInt8(size & 0xff)
    }
}

/// A box inside a byte array: its type, the whole box and its body (after the header).
private struct Box {
    let type: String
    let whole: Range<Int>
    let body: Range<Int>
}

/// What is wrong with a box read into memory: its type, its offset in the file, what.
private struct Damaged: Error {
    let box: String
    let offset: Int64
    let what: String
    /// Not damage: the file is too long to finish within the memory budget.
    var tooLong = false
    func error(_ path: String) -> MP4FinishError {
        MP4FinishError(tooLong ? .unsupported : .damaged, path: path, box: box, offset: offset, problem: what)
    }
}

/// A box read into memory (the moov, one moof) and its offset in the file. Every field is read
/// through `u8`/`u32`/`u64`, which check that it lies inside its box's body first.
private struct Bytes {
    let b: [UInt8]
    let base: Int64

    func at(_ box: Box) -> Int64 { base + Int64(box.whole.lowerBound) }
    func damaged(_ box: Box, _ what: String) -> Damaged { Damaged(box: box.type, offset: at(box), what: what) }

    private func check(_ box: Box, _ o: Int, _ n: Int, _ name: String) throws(Damaged) -> Int {
        guard o >= 0, o <= box.body.count - n else {
            throw damaged(box, "is cut short: its \(name) (\(n) bytes at byte \(o) of its body) lies past its \(box.body.count)-byte body")
        }
        return box.body.lowerBound + o
    }
    func u8(_ box: Box, _ o: Int, _ name: String) throws(Damaged) -> UInt8 { b[try check(box, o, 1, name)] }
    func u32(_ box: Box, _ o: Int, _ name: String) throws(Damaged) -> UInt32 { be32(b, try check(box, o, 4, name)) }
    func u64(_ box: Box, _ o: Int, _ name: String) throws(Damaged) -> UInt64 { be64(b, try check(box, o, 8, name)) }
    func fourCC(_ box: Box, _ o: Int, _ name: String) throws(Damaged) -> String { readFourCC(b, try check(box, o, 4, name)) }

    /// A full box's version, which must be one of `versions`.
    func version(_ box: Box, _ versions: ClosedRange<UInt8> = 0...1) throws(Damaged) -> UInt8 {
        let v = try u8(box, 0, "version")
        guard versions.contains(v) else { throw damaged(box, "has version \(v) (\(versions.lowerBound == versions.upperBound ? "only \(versions.lowerBound)" : "\(versions.lowerBound) or \(versions.upperBound)") exists)") }
        return v
    }

    /// The boxes in `parent`'s body, in order; `parent` nil: the whole array as one box.
    func children(_ parent: Box) throws(Damaged) -> [Box] {
        var out: [Box] = []
        var o = parent.body.lowerBound
        let upper = parent.body.upperBound
        while o < upper {
            let where_ = base + Int64(o)
            guard upper - o >= 8 else { throw Damaged(box: parent.type, offset: at(parent), what: "ends with \(upper - o) stray bytes at offset \(where_)") }
            var size = Int(be32(b, o)), hl = 8
            if size == 1 {
                guard upper - o >= 16 else { throw Damaged(box: parent.type, offset: at(parent), what: "holds a box header cut short at offset \(where_)") }
                let wide = be64(b, o + 8)
                guard wide <= UInt64(upper - o) else {
                    throw Damaged(box: readFourCC(b, o + 4), offset: where_, what: "has a 64-bit size of \(wide), past its parent \(parent.type) (\(upper - o) bytes left)")
                }
                size = Int(wide); hl = 16
            } else if size == 0 { size = upper - o }
            let type = readFourCC(b, o + 4)
            guard size >= hl else { throw Damaged(box: type, offset: where_, what: "has a size of \(size), less than its \(hl)-byte header") }
            guard size <= upper - o else { throw Damaged(box: type, offset: where_, what: "has a size of \(size), past its parent \(parent.type) (\(upper - o) bytes left)") }
            out.append(Box(type: type, whole: o..<(o + size), body: (o + hl)..<(o + size)))
            o += size
        }
        return out
    }

    /// The one child of `type` (nil: none); two are damage.
    func only(_ type: String, in kids: [Box], of parent: Box) throws(Damaged) -> Box? {
        let found = kids.filter { $0.type == type }
        guard found.count <= 1 else { throw damaged(found[1], "is the second \(type) box in the \(parent.type) at offset \(at(parent))") }
        return found.first
    }
    func only(_ type: String, in parent: Box) throws(Damaged) -> Box? { try only(type, in: try children(parent), of: parent) }
    func required(_ type: String, in parent: Box) throws(Damaged) -> Box {
        guard let b = try only(type, in: parent) else { throw damaged(parent, "has no \(type) box") }
        return b
    }

    var whole: Box { Box(type: b.count >= 8 ? readFourCC(b, 4) : "box", whole: 0..<b.count, body: 0..<b.count) }
}

/// `value * num / den` (value, num >= 0, den > 0) with `rounding`, nil when it does not fit Int64.
private func scaled(_ value: Int64, _ num: Int64, _ den: Int64, rounding: Rounding = .nearest) -> Int64? {
    guard value >= 0, num >= 0, den > 0 else { return nil }
    let (hi, lo) = UInt64(value).multipliedFullWidth(by: UInt64(num))
    let d = UInt64(den)
    guard hi < d else { return nil }
    var (q, r) = d.dividingFullWidth((hi, lo))
    let up: Bool
    switch rounding {
    case .nearest: up = r >= d - r
    case .down: up = false
    case .up: up = r != 0
    }
    if up && r != 0 { q += 1; r = 0 }
    return q <= UInt64(Int64.max) ? Int64(q) : nil
}

/// Bytes as MiB, or KiB below one MiB.
private func amount(_ bytes: Int) -> String { bytes >= 1 << 20 ? "\((bytes + (1 << 20) - 1) >> 20) MiB" : "\((bytes + 1023) >> 10) KiB" }

/// `a + b`, nil on overflow.
private func sum(_ a: Int64, _ b: Int64) -> Int64? {
    let (s, o) = a.addingReportingOverflow(b)
    return o ? nil : s
}

// MARK: - Tracks and samples

/// Equal values in a row, counted: a track's durations, composition offsets and sync flags, which
/// change a few times per fragment, cost a few runs per fragment rather than bytes per sample.
private struct Runs<T: Equatable> {
    var runs: [(count: UInt32, value: T)] = []
    mutating func append(_ x: T, count: UInt32 = 1) {
        guard count > 0 else { return }
        if let last = runs.last, last.value == x, last.count <= UInt32.max - count { runs[runs.count - 1].count += count }
        else { runs.append((count, x)) }
    }
    var last: T? { runs.last?.value }
    /// The last value (there is one) becomes `x`.
    mutating func replaceLast(with x: T) {
        runs[runs.count - 1].count -= 1
        if runs[runs.count - 1].count == 0 { runs.removeLast() }
        append(x)
    }
    func contains(where p: (T) -> Bool) -> Bool { runs.contains { p($0.value) } }
}

private final class Track {
    let id: UInt32
    let trak: Box
    var mediaTimescale: UInt32 = 0
    var isVideo = false
    /// stsd's entry count: a sample description index is 1...that.
    var sampleEntries: UInt32 = 0
    /// The original edit list: (segment duration in the movie timescale, media time, rate).
    var edits: [(duration: Int64, mediaTime: Int64, rate: UInt32)]? = nil
    var trex: (sdi: UInt32, duration: UInt32, size: UInt32, flags: UInt32)? = nil
    var durations = Runs<UInt32>()
    var sizes: [UInt32] = []
    var ctos = Runs<Int32>()
    var sync = Runs<Bool>()
    var chunks: [(offset: Int64, count: UInt32, sdi: UInt32)] = []
    var dtsEnd: Int64 = 0              // sum of the durations: the next sample's dts
    var presentationEnd: Int64 = Int64.min
    init(id: UInt32, trak: Box) { self.id = id; self.trak = trak }
}

/// The first moov, read: its tracks fill with samples as the fragments are read.
private final class Movie {
    let m: Bytes
    let moov: Box
    let kids: [Box]
    let movieTimescale: UInt32
    let tracks: [Track]
    let memoryBudget: Int

    init(m: Bytes, moov: Box, kids: [Box], movieTimescale: UInt32, tracks: [Track], memoryBudget: Int) {
        self.m = m; self.moov = moov; self.kids = kids; self.movieTimescale = movieTimescale; self.tracks = tracks
        self.memoryBudget = memoryBudget
    }

    /// What the tables take now (their capacity) and the new moov will take: checked against
    /// `memoryBudget` after each trun, so a file too long to finish in memory is refused early.
    var memoryEstimate: Int {
        tracks.reduce(m.b.count) { total, t in
            total + 4 * t.sizes.capacity + 8 * (t.durations.runs.capacity + t.ctos.runs.capacity + t.sync.runs.capacity)
                + 16 * t.chunks.capacity
                + 4 * t.sizes.count + 8 * (t.durations.runs.count + t.ctos.runs.count) + 12 * t.chunks.count   // the moov
        }
    }
}

extension Run {
    func parseMovie(_ m: Bytes, memoryBudget: Int) throws(MP4FinishError) -> Movie {
        do { return try parseMovieOrThrow(m, memoryBudget: memoryBudget) } catch { throw error.error(path) }
    }

    private func parseMovieOrThrow(_ m: Bytes, memoryBudget: Int) throws(Damaged) -> Movie {
        let top = try m.children(m.whole)
        guard top.count == 1, top[0].type == "moov" else { throw Damaged(box: "moov", offset: m.base, what: "cannot be read as one box") }
        let kids = try m.children(top[0])
        let mvhd = try m.required("mvhd", in: top[0])
        _ = try m.only("mvex", in: kids, of: top[0])
        let v = try m.version(mvhd)
        guard mvhd.body.count >= (v == 1 ? 112 : 100) else { throw m.damaged(mvhd, "is cut short: \(mvhd.body.count) bytes of body (version \(v) has \(v == 1 ? 112 : 100))") }
        let movieTimescale = try m.u32(mvhd, v == 1 ? 20 : 12, "timescale")
        guard movieTimescale > 0 else { throw m.damaged(mvhd, "has a timescale of 0") }

        var tracks: [Track] = []
        for trak in kids where trak.type == "trak" {
            let tkhd = try m.required("tkhd", in: trak)
            let tv = try m.version(tkhd)
            guard tkhd.body.count >= (tv == 1 ? 96 : 84) else { throw m.damaged(tkhd, "is cut short: \(tkhd.body.count) bytes of body (version \(tv) has \(tv == 1 ? 96 : 84))") }
            let id = try m.u32(tkhd, tv == 1 ? 20 : 12, "track_ID")
            // Up to UInt32.max - 2: the chapter track takes the next id and next_track_ID the one after.
            guard id > 0, id < UInt32.max - 1 else { throw m.damaged(tkhd, "has track ID \(id)") }
            guard !tracks.contains(where: { $0.id == id }) else { throw m.damaged(tkhd, "has track ID \(id), which another track has") }
            let t = Track(id: id, trak: trak)
            let mdia = try m.required("mdia", in: trak)
            let mdhd = try m.required("mdhd", in: mdia), hdlr = try m.required("hdlr", in: mdia)
            let mv = try m.version(mdhd)
            guard mdhd.body.count >= (mv == 1 ? 36 : 24) else { throw m.damaged(mdhd, "is cut short: \(mdhd.body.count) bytes of body (version \(mv) has \(mv == 1 ? 36 : 24))") }
            t.mediaTimescale = try m.u32(mdhd, mv == 1 ? 20 : 12, "timescale")
            guard t.mediaTimescale > 0 else { throw m.damaged(mdhd, "has a timescale of 0") }
            t.isVideo = try m.fourCC(hdlr, 8, "handler_type") == "vide"
            let minf = try m.required("minf", in: mdia), stbl = try m.required("stbl", in: minf)
            let stsd = try m.required("stsd", in: stbl)
            t.sampleEntries = try m.u32(stsd, 4, "entry_count")
            guard t.sampleEntries > 0 else { throw m.damaged(stsd, "describes no sample entry") }
            if let edts = try m.only("edts", in: trak), let elst = try m.only("elst", in: edts) {
                let ev = try m.version(elst)
                let n = try m.u32(elst, 4, "entry_count")
                let entry = ev == 1 ? 20 : 12
                guard Int(n) <= (elst.body.count - 8) / entry else {
                    throw m.damaged(elst, "claims \(n) edits but holds \(elst.body.count - 8) bytes of them (\(entry) each)")
                }
                var edits: [(duration: Int64, mediaTime: Int64, rate: UInt32)] = []
                var total: Int64 = 0
                for i in 0..<Int(n) {
                    let o = 8 + i * entry
                    let duration = ev == 1 ? Int64(bitPattern: try m.u64(elst, o, "segment_duration")) : Int64(try m.u32(elst, o, "segment_duration"))
                    let mediaTime = ev == 1 ? Int64(bitPattern: try m.u64(elst, o + 8, "media_time")) : Int64(Int32(bitPattern: try m.u32(elst, o + 4, "media_time")))
                    let rate = try m.u32(elst, o + (ev == 1 ? 16 : 8), "media_rate")
                    guard duration >= 0 else { throw m.damaged(elst, "has edit \(i + 1) with a negative duration (\(duration))") }
                    guard mediaTime >= -1 else { throw m.damaged(elst, "has edit \(i + 1) with media time \(mediaTime) (-1 is an empty edit; less means nothing)") }
                    guard let t = sum(total, duration) else { throw m.damaged(elst, "has edits whose durations add up past 64 bits") }
                    total = t
                    edits.append((duration, mediaTime, rate))
                }
                t.edits = edits
            }
            tracks.append(t)
        }
        if let mvex = try m.only("mvex", in: kids, of: top[0]) {
            for trex in try m.children(mvex) where trex.type == "trex" {
                _ = try m.version(trex, 0...0)
                let id = try m.u32(trex, 4, "track_ID")
                let d = (try m.u32(trex, 8, "default_sample_description_index"), try m.u32(trex, 12, "default_sample_duration"),
                         try m.u32(trex, 16, "default_sample_size"), try m.u32(trex, 20, "default_sample_flags"))
                guard let t = tracks.first(where: { $0.id == id }) else { continue }
                guard t.trex == nil else { throw m.damaged(trex, "is the second trex for track \(id)") }
                t.trex = d
            }
        }
        return Movie(m: m, moov: top[0], kids: kids, movieTimescale: movieTimescale, tracks: tracks, memoryBudget: memoryBudget)
    }
}

extension Movie {
    /// Reads one moof (`f`) whose mdat's body is `media` (file offsets): every sample must lie in it.
    func readFragment(_ f: Bytes, media: Range<Int64>, path: String) throws(MP4FinishError) {
        do { try readFragmentOrThrow(f, media: media) } catch { throw error.error(path) }
    }

    private func readFragmentOrThrow(_ f: Bytes, media: Range<Int64>) throws(Damaged) {
        let moofOffset = f.base
        let top = try f.children(f.whole)
        guard top.count == 1, top[0].type == "moof" else { throw Damaged(box: "moof", offset: moofOffset, what: "cannot be read as one box") }
        let moof = top[0]
        var previousTrafEnd: Int64? = nil
        for traf in try f.children(moof) where traf.type == "traf" {
            let kids = try f.children(traf)
            guard let tfhd = try f.only("tfhd", in: kids, of: traf) else { throw f.damaged(traf, "has no tfhd box") }
            _ = try f.version(tfhd, 0...0)
            let flags = try f.u32(tfhd, 0, "flags") & 0xff_ffff
            let id = try f.u32(tfhd, 4, "track_ID")
            guard let t = tracks.first(where: { $0.id == id }) else { throw f.damaged(tfhd, "is for track \(id), which the moov does not have") }
            guard let trex = t.trex else { throw f.damaged(tfhd, "is for track \(id), which has no trex in the moov's mvex") }
            var o = 8
            var base = moofOffset
            if flags & 0x1 != 0 {
                let b = try f.u64(tfhd, o, "base_data_offset"); o += 8
                guard b >= UInt64(media.lowerBound), b <= UInt64(media.upperBound) else {
                    throw f.damaged(tfhd, "has a base_data_offset of \(b), outside the mdat after its moof (\(media.lowerBound)..<\(media.upperBound))")
                }
                base = Int64(b)
            } else if flags & 0x20000 == 0, let end = previousTrafEnd { base = end }   // not default-base-is-moof: after the previous traf's data
            var (sdi, dDur, dSize, dFlags) = trex
            if flags & 0x2 != 0 { sdi = try f.u32(tfhd, o, "sample_description_index"); o += 4 }
            if flags & 0x8 != 0 { dDur = try f.u32(tfhd, o, "default_sample_duration"); o += 4 }
            if flags & 0x10 != 0 { dSize = try f.u32(tfhd, o, "default_sample_size"); o += 4 }
            if flags & 0x20 != 0 { dFlags = try f.u32(tfhd, o, "default_sample_flags"); o += 4 }
            guard (1...t.sampleEntries).contains(sdi) else { throw f.damaged(tfhd, "refers to sample description \(sdi) of track \(id), which has \(t.sampleEntries)") }
            if flags & 0x10000 != 0 { continue }  // duration-is-empty: no samples
            if let tfdt = try f.only("tfdt", in: kids, of: traf) {
                let v = try f.version(tfdt)
                let decodeTime = v == 1 ? Int64(bitPattern: try f.u64(tfdt, 4, "baseMediaDecodeTime")) : Int64(try f.u32(tfdt, 4, "baseMediaDecodeTime"))
                if decodeTime != t.dtsEnd {
                    // A gap: the previous sample lasts until this fragment (what FFmpeg shows, reading tfdt).
                    guard decodeTime > t.dtsEnd, let last = t.durations.last, decodeTime - t.dtsEnd <= Int64(UInt32.max - last) else {
                        throw f.damaged(tfdt, "says track \(id)'s fragment starts at \(decodeTime), but its previous samples end at \(t.dtsEnd)")
                    }
                    t.durations.replaceLast(with: last + UInt32(decodeTime - t.dtsEnd))
                    t.dtsEnd = decodeTime
                }
            }
            var next = base
            var firstTrun = true
            for trun in kids where trun.type == "trun" {
                let version = try f.version(trun)
                let tf = try f.u32(trun, 0, "flags") & 0xff_ffff
                let count = try f.u32(trun, 4, "sample_count")
                var p = 8
                if tf & 0x1 != 0 {
                    let d = Int64(Int32(bitPattern: try f.u32(trun, p, "data_offset"))); p += 4
                    next = base + d   // |d| < 2^31, base inside the file: no overflow
                } else if firstTrun { next = base }
                firstTrun = false
                var firstFlags: UInt32? = nil
                if tf & 0x4 != 0 { firstFlags = try f.u32(trun, p, "first_sample_flags"); p += 4 }
                let per = (tf & 0x100 != 0 ? 4 : 0) + (tf & 0x200 != 0 ? 4 : 0) + (tf & 0x400 != 0 ? 4 : 0) + (tf & 0x800 != 0 ? 4 : 0)
                // The count against the bytes that hold it, before anything is sized by it: per
                // sample, its fields in the trun and at least one byte in the mdat.
                let fieldBytes = trun.body.count - p
                if per > 0, Int(count) > fieldBytes / per {
                    throw f.damaged(trun, "claims \(count) samples but holds \(fieldBytes) bytes (\(per) per sample)")
                }
                guard next >= media.lowerBound, next <= media.upperBound else {
                    throw f.damaged(trun, "puts track \(id)'s samples at offset \(next), outside the mdat after its moof (\(media.lowerBound)..<\(media.upperBound))")
                }
                guard Int64(count) <= media.upperBound - next else {
                    throw f.damaged(trun, "claims \(count) samples but its mdat holds \(media.upperBound - next) bytes from its data offset (each sample has at least one)")
                }
                guard count > 0 else { continue }
                guard t.sizes.count + Int(count) <= Int(UInt32.max) else {
                    throw f.damaged(trun, "brings track \(id) past \(UInt32.max) samples, more than a standard MP4 can index")
                }
                let chunkStart = next
                for i in 0..<Int(count) {
                    var duration = dDur, size = dSize, sf = i == 0 ? (firstFlags ?? dFlags) : dFlags, cto: Int32 = 0
                    if tf & 0x100 != 0 { duration = try f.u32(trun, p, "sample_duration"); p += 4 }
                    if tf & 0x200 != 0 { size = try f.u32(trun, p, "sample_size"); p += 4 }
                    if tf & 0x400 != 0 { let v = try f.u32(trun, p, "sample_flags"); p += 4; if !(i == 0 && firstFlags != nil) { sf = v } }
                    if tf & 0x800 != 0 {
                        let v = try f.u32(trun, p, "sample_composition_time_offset"); p += 4
                        guard version == 1 || v <= UInt32(Int32.max) else { throw f.damaged(trun, "has a composition offset of \(v) in version 0") }
                        cto = Int32(bitPattern: v)
                    }
                    guard size > 0 else { throw f.damaged(trun, "has sample \(i + 1) of track \(id) of 0 bytes") }
                    guard Int64(size) <= media.upperBound - next else {
                        throw f.damaged(trun, "puts track \(id)'s sample \(i + 1) (\(size) bytes at offset \(next)) past the end of its mdat (\(media.upperBound))")
                    }
                    guard let dts = sum(t.dtsEnd, Int64(duration)), let pEnd = sum(t.dtsEnd, Int64(cto) + Int64(duration)) else {
                        throw f.damaged(trun, "takes track \(id)'s timestamps past 64 bits")
                    }
                    t.durations.append(duration)
                    t.sizes.append(size)
                    t.ctos.append(cto)
                    // Sync: not a non-sync sample and not one that depends on others (as FFmpeg reads trun flags).
                    t.sync.append(sf & 0x10000 == 0 && sf & 0x300_0000 != 0x100_0000)
                    t.presentationEnd = max(t.presentationEnd, pEnd)
                    t.dtsEnd = dts
                    next += Int64(size)
                }
                t.chunks.append((chunkStart, count, sdi))
                let estimate = memoryEstimate
                guard estimate <= memoryBudget else {
                    let samples = tracks.reduce(0) { $0 + $1.sizes.count }
                    throw Damaged(box: "moof", offset: moofOffset, what: "brings the recording to \(samples) samples, which need about \(amount(estimate)) to finish, more than the finisher's \(amount(memoryBudget)) (a recording this long stays a fragmented MP4, which plays; cap recordings with max_duration)", tooLong: true)
                }
            }
            previousTrafEnd = next
        }
    }
}

extension Movie {
    struct Built {
        var moov: [UInt8]
        var samples: Int
        /// The `free` box holding the chapter track's samples, written at dataEnd (empty: no chapters).
        var chapterText: [UInt8] = []
        var chapters = 0
        var warnings: [String] = []
    }

    func build(dataEnd: Int64, markers: [TakeMarker], path: String) throws(MP4FinishError) -> Built {
        do { return try buildOrThrow(dataEnd: dataEnd, markers: markers, path: path) } catch { throw error.error(path) }
    }

    /// Damage found while building: in the moov (durations that do not fit).
    private func overflow(_ what: String) -> Damaged { Damaged(box: "moov", offset: m.base, what: what) }

    private func buildOrThrow(dataEnd: Int64, markers: [TakeMarker], path: String) throws(Damaged) -> Built {
        // Chapters on the clock of the video track (the audio track without video).
        var built = Built(moov: [], samples: tracks.reduce(0) { $0 + $1.sizes.count })
        var chapterTrak: [UInt8]? = nil, chpl: [UInt8]? = nil
        let clockTrack = tracks.first { $0.isVideo } ?? tracks.first
        let chapterID = (tracks.map(\.id).max() ?? 0) + 1   // ids are below UInt32.max - 1
        if let clock = clockTrack, !markers.isEmpty {
            let end = try presentationEnd(clock)
            let list = chapters(markers, end: end, path: path, warnings: &built.warnings)
            if !list.isEmpty {
                let text = chapterSamples(list)
                built.chapterText = box("free", text.bytes)
                chapterTrak = try textTrak(id: chapterID, timescale: clock.mediaTimescale, starts: list.map(\.start), end: end,
                                           sizes: text.sizes, offset: dataEnd + 8)
                chpl = try nero(list, timescale: clock.mediaTimescale)
                built.chapters = list.count
            }
        }

        // The new moov: mvhd, the tracks, everything else the first one had but mvex; built in one
        // array reserved at its size (its tables are most of it), so it is never copied.
        var durations: [(edits: [(duration: Int64, mediaTime: Int64, rate: UInt32)]?, track: Int64)] = []
        for t in tracks { durations.append(try trackDuration(t)) }
        let movieDuration = durations.map(\.track).max() ?? 0
        var estimate = m.b.count + 4096 + (chapterTrak?.count ?? 0) + (chpl?.count ?? 0)
        for t in tracks {
            estimate += 4 * t.sizes.count + 8 * (t.durations.runs.count + t.ctos.runs.count) + 12 * t.chunks.count + 256
            if t.sync.contains(where: { !$0 }) { estimate += 4 * t.sync.runs.reduce(0) { $0 + ($1.value ? Int($1.count) : 0) } }
        }
        var moov: [UInt8] = []
        moov.reserveCapacity(estimate)
        var nextTrak = 0
        let lastTrak = kids.lastIndex { $0.type == "trak" }
        try moov.appendBox("moov") { (body: inout [UInt8]) throws(Damaged) in
            for (i, k) in kids.enumerated() {
                switch k.type {
                case "mvhd":
                    var h = try timeHeader(k, duration: movieDuration, track: false)
                    if chapterTrak != nil {
                        // next_track_ID, the mvhd's field after 80 bytes of rate, volume, matrix and pre_defined.
                        let n = 8 + (h[8] == 1 ? 108 : 96)
                        let next = max(be32(h, n), chapterID + 1)
                        h.replaceSubrange(n..<(n + 4), with: [UInt8(next >> 24), UInt8(next >> 16 & 0xff), UInt8(next >> 8 & 0xff), UInt8(next & 0xff)])
                    }
                    body += h
                case "trak":
                    let t = tracks[nextTrak]
                    try buildTrak(into: &body, t, edits: durations[nextTrak].edits, trackDuration: durations[nextTrak].track,
                                  chapterTrack: chapterTrak != nil && t === clockTrack ? chapterID : nil)
                    nextTrak += 1
                    if i == lastTrak, let c = chapterTrak { body += c }
                case "mvex": continue
                case "udta" where chpl != nil:
                    body += box("udta", try m.children(k).filter { $0.type != "chpl" }.flatMap { m.b[$0.whole] } + chpl!)
                    chpl = nil
                default: body += m.b[k.whole]
                }
            }
            if let chpl { body += box("udta", chpl) }
        }
        built.moov = moov
        return built
    }

    /// Where `t`'s presentation ends, in its media timescale (0 = the movie's start): the empty
    /// edits before its media, then its samples from the media edit's start.
    private func presentationEnd(_ t: Track) throws(Damaged) -> Int64 {
        let end = t.presentationEnd == Int64.min ? 0 : t.presentationEnd
        guard let e = t.edits, let media = e.lastIndex(where: { $0.mediaTime >= 0 }) else { return end }
        // Each duration is >= 0 and their sum fits (checked when read).
        let empty = e[..<media].filter { $0.mediaTime == -1 }.reduce(Int64(0)) { $0 + $1.duration }
        guard let lead = scaled(empty, Int64(t.mediaTimescale), Int64(movieTimescale)), let p = sum(lead, end),
              let r = sum(p, -e[media].mediaTime) else {
            throw overflow("track \(t.id)'s edit list and samples end past 64 bits")
        }
        return r
    }

    /// The chapters from the markers, in file order: each must start before `end` (a take begun
    /// just before the media ends has none) and after the one before (a marker repeated or out of
    /// order is skipped). A first chapter after 0 (the first take's marker was lost) gets an
    /// untitled chapter before it, so the chapters still cover the file from its start.
    private func chapters(_ markers: [TakeMarker], end: Int64, path: String, warnings: inout [String]) -> [(start: Int64, title: String)] {
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
    private func textTrak(id: UInt32, timescale: UInt32, starts: [Int64], end: Int64,
                          sizes: [UInt32], offset: Int64) throws(Damaged) -> [UInt8] {
        guard let trackDuration = scaled(end, Int64(movieTimescale), Int64(timescale), rounding: .up) else {
            throw overflow("the chapters end past 64 bits in the movie timescale")
        }
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
    private func nero(_ list: [(start: Int64, title: String)], timescale: UInt32) throws(Damaged) -> [UInt8] {
        var b: [UInt8] = [0, 0, 0, 0, UInt8(min(list.count, 255))]
        for c in list.prefix(255) {
            guard let start = scaled(c.start, 10_000_000, Int64(timescale)) else { throw overflow("a chapter starts past 64 bits in 100 ns units") }
            put64(&b, UInt64(start))
            let title = Array(TakeMarker.cut(c.title).utf8)
            b.append(UInt8(title.count)); b += title
        }
        return fullBox("chpl", version: 1, b)
    }

    /// mvhd, tkhd or mdhd with a new duration, version 1 when it needs 64 bits, the rest as it was
    /// (its length was checked when the moov was read).
    private func timeHeader(_ b: Box, duration: Int64, track: Bool) throws(Damaged) -> [UInt8] {
        let v1 = try m.u8(b, 0, "version") == 1
        let flags = try m.u32(b, 0, "flags") & 0xff_ffff
        let created = v1 ? try m.u64(b, 4, "creation_time") : UInt64(try m.u32(b, 4, "creation_time"))
        let modified = v1 ? try m.u64(b, 12, "modification_time") : UInt64(try m.u32(b, 8, "modification_time"))
        let p = v1 ? 20 : 12
        let afterMiddle = p + (track ? 8 : 4)
        let tailStart = afterMiddle + (v1 ? 8 : 4)
        guard tailStart <= b.body.count else { throw m.damaged(b, "is cut short") }
        let o = b.body.lowerBound
        let middle = Array(m.b[(o + p)..<(o + afterMiddle)])   // timescale, or track_ID + reserved
        let tail = Array(m.b[(o + tailStart)..<b.body.upperBound])
        let wide = duration > Int64(UInt32.max) || created > UInt64(UInt32.max) || modified > UInt64(UInt32.max)
        var body: [UInt8] = []
        if wide { put64(&body, created); put64(&body, modified) } else { put32(&body, UInt32(created)); put32(&body, UInt32(modified)) }
        body += middle
        if wide { put64(&body, UInt64(duration)) } else { put32(&body, UInt32(duration)) }
        body += tail
        return fullBox(b.type, version: wide ? 1 : 0, flags: flags, body)
    }

    /// The track's edits and duration in the movie timescale, as the new moov has them.
    private func trackDuration(_ t: Track) throws(Damaged) -> (edits: [(duration: Int64, mediaTime: Int64, rate: UInt32)]?, track: Int64) {
        let mediaDuration = t.dtsEnd
        // The edit list: empty edits as they were; the media edit now lasts to the end of the
        // presentation (libavformat wrote 0 in the fragmented moov). Rounded up: never cuts a sample.
        var edits = t.edits
        guard var trackDuration = scaled(mediaDuration, Int64(movieTimescale), Int64(t.mediaTimescale), rounding: .up) else {
            throw overflow("track \(t.id)'s duration does not fit 64 bits in the movie timescale")
        }
        if var e = edits, let last = e.lastIndex(where: { $0.mediaTime >= 0 }) {
            let end = t.presentationEnd == Int64.min ? 0 : t.presentationEnd
            guard let span = sum(end, -e[last].mediaTime), let d = scaled(max(0, span), Int64(movieTimescale), Int64(t.mediaTimescale), rounding: .up) else {
                throw overflow("track \(t.id)'s media edit does not fit 64 bits in the movie timescale")
            }
            e[last].duration = d
            edits = e
            var total: Int64 = 0
            for x in e {
                guard let s = sum(total, x.duration) else { throw overflow("track \(t.id)'s edits add up past 64 bits") }
                total = s
            }
            trackDuration = total
        }
        return (edits, trackDuration)
    }

    /// `chapterTrack`: the chapter track's id, referenced from this track (`tref/chap`).
    private func buildTrak(into out: inout [UInt8], _ t: Track, edits: [(duration: Int64, mediaTime: Int64, rate: UInt32)]?,
                           trackDuration: Int64, chapterTrack: UInt32?) throws(Damaged) {
        var kids = try m.children(t.trak)
        var chap: [UInt8] = []
        if let id = chapterTrack { put32(&chap, id); chap = box("chap", chap) }
        // The chapter reference: in the trak's tref (movenc puts it after tkhd and edts).
        let oldTref = kids.first { $0.type == "tref" }
        let others = try oldTref.map { (tref) throws(Damaged) in try m.children(tref).filter { $0.type != "chap" }.flatMap { m.b[$0.whole] } } ?? []
        if !chap.isEmpty { kids.removeAll { $0.type == "tref" } }
        let trefAfter = kids.lastIndex { $0.type == "edts" } ?? kids.firstIndex { $0.type == "tkhd" }
        try out.appendBox("trak") { (body: inout [UInt8]) throws(Damaged) in
            for (i, k) in kids.enumerated() {
                switch k.type {
                case "tkhd": body += try timeHeader(k, duration: trackDuration, track: true)
                case "edts":
                    if let e = edits {
                        let wide = e.contains { $0.duration > Int64(UInt32.max) || $0.mediaTime > Int64(Int32.max) }
                        var b: [UInt8] = []
                        put32(&b, UInt32(e.count))
                        for x in e {
                            if wide { put64(&b, UInt64(x.duration)); put64(&b, UInt64(bitPattern: x.mediaTime)) }
                            else { put32(&b, UInt32(x.duration)); put32(&b, UInt32(bitPattern: Int32(x.mediaTime))) }
                            put32(&b, x.rate)
                        }
                        body += box("edts", fullBox("elst", version: wide ? 1 : 0, b))
                    } else { body += m.b[k.whole] }
                case "mdia": try buildMdia(into: &body, k, t, mediaDuration: t.dtsEnd)
                default: body += m.b[k.whole]
                }
                if !chap.isEmpty, i == trefAfter { body += box("tref", others + chap) }
            }
        }
    }

    private func buildMdia(into out: inout [UInt8], _ mdia: Box, _ t: Track, mediaDuration: Int64) throws(Damaged) {
        let kids = try m.children(mdia)
        try out.appendBox("mdia") { (body: inout [UInt8]) throws(Damaged) in
            for k in kids {
                switch k.type {
                case "mdhd": body += try timeHeader(k, duration: mediaDuration, track: false)
                case "minf":
                    let parts = try m.children(k)
                    try body.appendBox("minf") { (minf: inout [UInt8]) throws(Damaged) in
                        for c in parts {
                            if c.type == "stbl" {
                                let stsd = try m.required("stsd", in: c)
                                minf.appendBox("stbl") { stbl in
                                    stbl += m.b[stsd.whole]
                                    sampleTables(into: &stbl, t)
                                }
                            } else { minf += m.b[c.whole] }
                        }
                    }
                default: body += m.b[k.whole]
                }
            }
        }
    }

    /// stts, ctts (when any sample has a composition offset), stss (when any sample is not a sync
    /// sample), stsz, stsc, stco or co64, appended to `out`. Counts fit 32 bits: a track has at most
    /// UInt32.max samples.
    private func sampleTables(into out: inout [UInt8], _ t: Track) {
        out.appendBox("stts", version: 0) { b in
            put32(&b, UInt32(t.durations.runs.count))
            for r in t.durations.runs { put32(&b, r.count); put32(&b, r.value) }
        }
        if t.ctos.contains(where: { $0 != 0 }) {
            out.appendBox("ctts", version: t.ctos.contains { $0 < 0 } ? 1 : 0) { b in
                put32(&b, UInt32(t.ctos.runs.count))
                for r in t.ctos.runs { put32(&b, r.count); put32(&b, UInt32(bitPattern: r.value)) }
            }
        }
        if t.sync.contains(where: { !$0 }) {
            out.appendBox("stss", version: 0) { b in
                put32(&b, UInt32(t.sync.runs.reduce(0) { $0 + ($1.value ? Int($1.count) : 0) }))
                var n: UInt32 = 0
                for r in t.sync.runs {
                    if r.value { for k in 1...r.count { put32(&b, n + k) } }
                    n += r.count
                }
            }
        }
        out.appendBox("stsz", version: 0) { b in
            if let first = t.sizes.first, t.sizes.allSatisfy({ $0 == first }) {
                put32(&b, first); put32(&b, UInt32(t.sizes.count))
            } else {
                put32(&b, 0); put32(&b, UInt32(t.sizes.count))
                for s in t.sizes { put32(&b, s) }
            }
        }
        var stsc: [(first: UInt32, count: UInt32, sdi: UInt32)] = []
        for (i, c) in t.chunks.enumerated() where stsc.last.map({ $0.count != c.count || $0.sdi != c.sdi }) ?? true {
            stsc.append((UInt32(i + 1), c.count, c.sdi))
        }
        out.appendBox("stsc", version: 0) { b in
            put32(&b, UInt32(stsc.count))
            for e in stsc { put32(&b, e.first); put32(&b, e.count); put32(&b, e.sdi) }
        }
        let wide = t.chunks.contains { $0.offset > Int64(UInt32.max) }
        out.appendBox(wide ? "co64" : "stco", version: 0) { b in
            put32(&b, UInt32(t.chunks.count))
            for c in t.chunks { if wide { put64(&b, UInt64(c.offset)) } else { put32(&b, UInt32(c.offset)) } }
        }
    }
}
