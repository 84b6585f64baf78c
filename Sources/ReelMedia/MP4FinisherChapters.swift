// MP4Finisher's chapters: the take markers become a QuickTime chapter track and a Nero `chpl`
// box, both as FFmpeg's movenc writes them (called from `Movie.build`).

extension Movie {
    /// Where `t`'s presentation ends, in its media timescale (0 = the movie's start): the empty
    /// edits before its media, then its samples from the media edit's start.
    func presentationEnd(_ t: Track) throws(Damaged) -> Int64 {
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
    func chapters(_ markers: [TakeMarker], end: Int64, path: String, warnings: inout [String]) -> [(start: Int64, title: String)] {
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
    func chapterSamples(_ list: [(start: Int64, title: String)]) -> (bytes: [UInt8], sizes: [UInt32]) {
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
    func textTrak(id: UInt32, timescale: UInt32, starts: [Int64], end: Int64,
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
    func nero(_ list: [(start: Int64, title: String)], timescale: UInt32) throws(Damaged) -> [UInt8] {
        var b: [UInt8] = [0, 0, 0, 0, UInt8(min(list.count, 255))]
        for c in list.prefix(255) {
            guard let start = scaled(c.start, 10_000_000, Int64(timescale)) else { throw overflow("a chapter starts past 64 bits in 100 ns units") }
            put64(&b, UInt64(start))
            let title = Array(TakeMarker.cut(c.title).utf8)
            b.append(UInt8(title.count)); b += title
        }
        return fullBox("chpl", version: 1, b)
    }
}
