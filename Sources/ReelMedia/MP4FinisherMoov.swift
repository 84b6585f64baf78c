// MP4Finisher, writing: the new moov (`Movie.build`), built in one array from the sample tables
// and the first moov (durations, edit lists, stts/ctts/stss/stsz/stsc/stco), chapters included.

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
    func overflow(_ what: String) -> Damaged { Damaged(box: "moov", offset: m.base, what: what) }

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
