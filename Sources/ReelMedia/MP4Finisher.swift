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
///
/// Files: this one (the walk over the top-level boxes and the three steps), MP4FinisherTables.swift
/// (reading the moov and the fragments), MP4FinisherMoov.swift and MP4FinisherChapters.swift
/// (building the new moov), MP4Boxes.swift (box bytes), MP4FinishError.swift.
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

// MARK: - The run

struct Run {
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
