// MP4Finisher, reading: the first moov (`Run.parseMovie`) and every fragment (`Movie.readFragment`)
// into each track's sample tables, every count and offset checked, within the memory budget.

// MARK: - Tracks and samples

/// Equal values in a row, counted: a track's durations, composition offsets and sync flags, which
/// change a few times per fragment, cost a few runs per fragment rather than bytes per sample.
struct Runs<T: Equatable> {
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

final class Track {
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
final class Movie {
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
