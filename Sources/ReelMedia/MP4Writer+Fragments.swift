internal import CFFmpeg
internal import CFFmpegShim
internal import ReelFFmpeg
import Glibc
import ReelCore
import ReelSystem

// MP4Writer's packets and fragments: each track's packets into the muxer (video held one packet
// for its true duration, dts forced increasing, the undo's shift added), the fragment cuts, and
// each fragment handed to the file (the placeholder and signature after ftyp, tfdt and sequence
// numbers set right by `FragmentRewrite`, one write).

extension MP4Writer {
    /// Writes one H.264 packet (times in the video encoder's time base), in the encoder's output order.
    public func writeVideo(_ p: Packet) throws { try lock.withLock { try writeVideoLocked(p) } }

    private func writeVideoLocked(_ p: Packet) throws {
        guard let video else { throw MediaError("MP4Writer.writeVideo on '\(path)': the file was created without video") }
        if let failure { throw failure }
        if var b = boundary, let start = b.videoStart, b.videoCrossed || p.pts >= start {
            if !b.videoCrossed {
                // The last packet before the take ends where the take's first packet begins, but
                // at most one frame after it when the take's cut will start a fragment (the audio
                // has data; see cutTake): frames dropped at the take's start are then a gap that
                // the fragment's tfdt covers (the finisher and FFmpeg show the frame until then).
                // Stretched over them, it reached past where a retake of the same start begins
                // after an undo, and the finisher refused the file as damaged.
                if let h = heldVideo {
                    let untilTake = max(1, p.dts - h.dts)
                    let cutStartsFragment = audio == nil || audio?.lastDts != nil
                    try writeHeldVideo(h, duration: cutStartsFragment ? min(untilTake, max(1, h.duration)) : untilTake, video)
                }
                b.videoCrossed = true
                boundary = b
            }
            try hold(p, video: true)
            return
        }
        try writeVideoNow(p, video)
    }

    func writeVideoNow(_ p: Packet, _ video: Track) throws {
        // Later in display order than every frame before it: those have no hole, so a fragment may end there.
        let mayCut = video.maxPts.map { p.pts > $0 } ?? true
        video.maxPts = max(video.maxPts ?? p.pts, p.pts)
        if let h = heldVideo { try writeHeldVideo(h, duration: max(1, p.dts - h.dts), video) }
        heldVideoBytes.removeAll(keepingCapacity: true)
        heldVideoBytes.append(contentsOf: p.data)
        heldVideo = (p.pts, p.dts, p.duration, p.isKeyframe, mayCut)
    }

    func writeHeldVideo(_ h: (pts: Int64, dts: Int64, duration: Int64, isKeyframe: Bool, mayCut: Bool),
                                duration: Int64, _ video: Track) throws {
        heldVideo = nil
        try heldVideoBytes.withUnsafeBytes { bytes in
            try write(Packet(data: bytes, pts: h.pts, dts: h.dts, duration: duration, isKeyframe: h.isKeyframe),
                      video, mayCut: h.mayCut)
        }
    }

    /// Writes one AAC packet (times in the audio encoder's time base), in the encoder's output order.
    public func writeAudio(_ p: Packet) throws { try lock.withLock { try writeAudioLocked(p) } }

    private func writeAudioLocked(_ p: Packet) throws {
        guard let audio else { throw MediaError("MP4Writer.writeAudio on '\(path)': the file was created without audio") }
        if let failure { throw failure }
        if var b = boundary, let start = b.audioStart, b.audioCrossed || p.pts + max(1, p.duration) > start - audioLead {
            if !b.audioCrossed { b.audioCrossed = true; boundary = b }
            try hold(p, video: false)
            return
        }
        try writeAudioNow(p, audio)
    }

    func writeAudioNow(_ p: Packet, _ audio: Track) throws {
        var mayCut = true
        if let video {
            // Only when the video has stopped coming (or has not come at all for that long).
            let videoDts = video.lastDts.map { micros($0, video) } ?? 0
            mayCut = micros(p.dts, audio) - videoDts > Self.videoStallMicros
        }
        try write(p, audio, mayCut: mayCut)
    }

    func micros(_ x: Int64, _ t: Track) -> Int64 { rescale(x, 1_000_000 * t.timeBase.num, t.timeBase.den) }

    /// Where every track has been written up to (the smallest presentation end), in microseconds.
    var coveredMicros: Int64 {
        let ends = [video, audio].compactMap { $0 }.map { $0.endMicros ?? 0 }
        return max(0, ends.min() ?? 0)
    }

    private func write(_ p: Packet, _ t: Track, mayCut: Bool) throws {
        if let failure { throw failure }
        guard !finished else { throw MediaError("MP4Writer: \(t.name) packet after finish() on '\(path)'") }
        var dts = p.dts, pts = p.pts
        if let last = t.lastDts, dts <= last {
            dts = last + 1
            pts = max(pts, dts)
            fixes += 1
        }
        let dtsMicros = micros(dts, t)
        // (lastDts still as before this packet: every track must have a packet written already.)
        if mayCut, dtsMicros >= nextCutMicros || fragments == 0,
           video?.lastDts != nil || video == nil, audio?.lastDts != nil || audio == nil {
            // Cut before this packet, so each fragment ends just under a boundary (the first as
            // soon as every track has data).
            try cutFragment()
            nextCutMicros = max(nextCutMicros, (dtsMicros / fragmentMicros + 1) * fragmentMicros)
        }
        t.lastDts = dts

        let pkt = packet.p
        let toStream = t.toStream
        // Safe: libavformat only reads a non-refcounted packet's data (movenc copies it into the fragment).
        pkt.pointee.data = UnsafeMutablePointer(mutating: p.data.baseAddress?.assumingMemoryBound(to: UInt8.self))
        pkt.pointee.size = Int32(p.data.count)
        if t.realign {
            // The first packet after an undo continues the muxer's clock exactly where it is.
            t.shift = t.muxNext - toStream(dts)
            t.realign = false
        }
        let sdts = toStream(dts) + t.shift
        pkt.pointee.pts = toStream(pts) + t.shift
        pkt.pointee.dts = sdts
        pkt.pointee.duration = toStream(p.duration)
        pkt.pointee.flags = p.isKeyframe ? AV_PKT_FLAG_KEY : 0
        pkt.pointee.stream_index = t.index
        let rc = av_write_frame(out.p, pkt)
        pkt.pointee.data = nil; pkt.pointee.size = 0
        try checkAV(rc, "cannot write a \(t.name) packet (dts \(dts)) to '\(path)'")
        t.muxNext = sdts + toStream(p.duration)
        t.nextDts = dts + p.duration
        let end = micros(pts + p.duration, t)
        t.endMicros = max(t.endMicros ?? end, end)
    }

    /// Ends the current fragment and hands it to the file.
    func cutFragment() throws {
        let ctx = out.p
        // With delay_moov the first forced flush writes only the moov; the second writes the fragment.
        for _ in 0..<(fragments == 0 ? 2 : 1) {
            try checkAV(av_write_frame(ctx, nil), "cannot write a fragment to '\(path)'")
        }
        fragments += 1
        avio_flush(ctx.pointee.pb)
        for m in pendingMarkers { writeMarker(m) }
        pendingMarkers.removeAll()
        try commit()
        // Everything up to here reached the file whole.
        complete.bytes = fileEnd
        complete.micros = coveredMicros
        onFragmentWritten?()
    }

    /// Hands what the muxer wrote since the last fragment to the file: the placeholder and the
    /// signature after ftyp (the first time), each moof's tfdt and sequence number set right, then one write.
    func commit() throws {
        var from = 0
        if !placeholderIn {
            guard sink.bytes.count >= 8 else { return }
            let ftyp = Int(sink.bytes[0]) << 24 | Int(sink.bytes[1]) << 16 | Int(sink.bytes[2]) << 8 | Int(sink.bytes[3])
            guard ftyp >= 8, ftyp <= sink.bytes.count else { throw MediaError("MP4Writer: the muxer's first box on '\(path)' is \(ftyp) bytes") }
            sink.bytes.insert(contentsOf: Self.afterFtyp, at: ftyp)
            placeholderIn = true
            from = ftyp + Self.afterFtyp.count
        }
        var shifts: [UInt32: Int64] = [:]
        for t in [video, audio].compactMap({ $0 }) where t.shift != 0 { shifts[t.trackID] = t.shift }
        do { try FragmentRewrite.apply(&sink.bytes, from: from, shifts: shifts, sequence: &sequence) }
        catch { throw MediaError("MP4Writer: cannot set the fragment times of '\(path)' right: \(error)") }
        let (written, failed) = sink.bytes.withUnsafeBytes { Sys.writeFully(fd, $0) }
        fileEnd += Int64(written)
        sink.bytes.removeAll(keepingCapacity: true)
        if let e = failed {
            // What reached the file of this fragment is cut off by abandon().
            let err = MediaError("cannot write to '\(path)': \(Errno.text(e))", systemError: e)
            failure = err
            throw err
        }
    }
}
