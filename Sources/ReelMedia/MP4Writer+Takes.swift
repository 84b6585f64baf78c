internal import CFFmpeg
internal import CFFmpegShim
internal import ReelFFmpeg
import Glibc
import ReelCore
import ReelSystem

// MP4Writer's takes: a take announced (`beginTake`, `beginAudioTake`), its packets held until
// every track reaches it, its clean cut and marker, and `rollback` (undo) to a cut.

extension MP4Writer {
    /// A take announced and not yet cut into the file.
    struct Boundary {
        var index: Int
        var label: String?
        var videoStart: Int64?
        var audioStart: Int64?
        var videoCrossed = false
        var audioCrossed = false
    }

    /// A packet of a take held until its cut (bytes in `heldBytes`).
    struct Held {
        var video: Bool
        var pts: Int64, dts: Int64, duration: Int64, isKeyframe: Bool
        var range: Range<Int>
    }

    /// A clean cut in the file: where take `index` begins, and what an undo of it restores.
    struct Cut {
        var index: Int
        var fileOffset: Int64
        var fragments: Int
        var sequence: UInt32
        var nextCutMicros: Int64
        var completeMicros: Int64
        var video: Track.State?
        var audio: Track.State?
        /// The file dts (audio encoder time base) of the take's first audio packet: where the next
        /// take's audio continues after an undo.
        var audioNext: Int64?
    }

    /// A take begins: `start` is its first frame's pts in the video encoder's time base (without
    /// video: its first sample's output sample number, in the audio encoder's time base); 0 is the
    /// file's first frame. Its marker (index, start in the chapter clock: the track's media
    /// timescale, label cut to `TakeMarker.maxLabelBytes`) is written at its cut (take 1: at the
    /// first fragment boundary). With video and audio, `beginAudioTake` announces the audio side.
    public func beginTake(index: Int, label: String?, start: Int64) throws { try lock.withLock { try beginTakeLocked(index: index, label: label, start: start) } }

    private func beginTakeLocked(index: Int, label: String?, start: Int64) throws {
        try announce(index: index, label: label, video: video != nil ? start : nil, audio: video == nil ? start : nil)
    }

    /// With video: the audio of take `index` begins at output sample `sample` (what the packet
    /// holding it and every later one belong to). Without video, `beginTake` says it.
    public func beginAudioTake(index: Int, label: String?, sample: Int64) throws { try lock.withLock { try beginAudioTakeLocked(index: index, label: label, sample: sample) } }

    private func beginAudioTakeLocked(index: Int, label: String?, sample: Int64) throws {
        guard audio != nil, video != nil else { return }
        try announce(index: index, label: label, video: nil, audio: sample)
    }

    private func announce(index: Int, label: String?, video v: Int64?, audio a: Int64?) throws {
        if let failure { throw failure }
        guard !finished else { throw MediaError("MP4Writer.beginTake(\(index)) after finish() on '\(path)'") }
        guard index >= 1, (v ?? 0) >= 0, (a ?? 0) >= 0 else {
            throw MediaError("MP4Writer.beginTake on '\(path)': take \(index) at \(v ?? a ?? 0); takes count from 1 and start at 0 or later")
        }
        // Takes come in media order: a later take (or the other track of the same one), starting
        // no earlier than the last one announced on that track. Cuts and markers assume it.
        if index < announced.index {
            throw MediaError("MP4Writer.beginTake on '\(path)': take \(index) announced after take \(announced.index); takes must come in media order (an undone take is removed with rollback first)")
        }
        if let v, let last = announced.video, v < last {
            throw MediaError("MP4Writer.beginTake on '\(path)': take \(index)'s video starts at \(v), before take \(announced.index)'s at \(last); takes must come in media order")
        }
        if let a, let last = announced.audio, a < last {
            throw MediaError("MP4Writer.beginTake on '\(path)': take \(index)'s audio starts at sample \(a), before take \(announced.index)'s at \(last); takes must come in media order")
        }
        announced = (index, v ?? announced.video, a ?? announced.audio)
        if index == 1 {
            // The file's start: nothing before it to cut from.
            guard cuts.isEmpty, !pendingMarkers.contains(where: { $0.index == 1 }), markers.isEmpty else { return }
            if let v { pendingMarkers.append(TakeMarker(index: 1, start: video!.toStream(v), label: label ?? "")) }
            else if video == nil, let a { pendingMarkers.append(TakeMarker(index: 1, start: audio!.toStream(a), label: label ?? "")) }
            return
        }
        if let b = boundary, b.index != index { try cutTake(b) }
        var b = boundary ?? Boundary(index: index, label: label)
        if let v { b.videoStart = v }
        if let a { b.audioStart = a }
        if b.label == nil { b.label = label }
        boundary = b
    }

    /// Holds a packet of the announced take until every track reaches it; cuts when they have.
    func hold(_ p: Packet, video isVideo: Bool) throws {
        let start = heldBytes.count
        heldBytes.append(contentsOf: p.data)
        held.append(Held(video: isVideo, pts: p.pts, dts: p.dts, duration: p.duration, isKeyframe: p.isKeyframe,
                         range: start..<heldBytes.count))
        guard let b = boundary else { return }
        let videoReady = video == nil || b.videoCrossed
        let audioReady = audio == nil || b.audioCrossed
        if videoReady && audioReady || heldBytes.count > Self.heldLimitBytes || heldSpanMicros > Self.videoStallMicros {
            try cutTake(b)
        }
    }

    /// Media time between the first and last packet held on one track.
    private var heldSpanMicros: Int64 {
        var span: Int64 = 0
        for (isVideo, t) in [(true, video), (false, audio)] {
            guard let t, let first = held.first(where: { $0.video == isVideo }), let last = held.last(where: { $0.video == isVideo }) else { continue }
            span = max(span, micros(last.dts - first.dts, t))
        }
        return span
    }

    /// The take's clean cut: the fragment so far goes out, then the take's marker, then what was held of it.
    func cutTake(_ b: Boundary) throws {
        boundary = nil
        let clock = (video ?? audio)!
        let start = video != nil ? b.videoStart : b.audioStart
        let firstAudio = held.first(where: { !$0.video })
        // Each track must have data before the first fragment (the moov's edit lists come from it).
        let canCut = [video, audio].allSatisfy { $0 == nil || $0!.lastDts != nil } && heldVideo == nil
        if canCut {
            try cutFragment()
            nextCutMicros = max(nextCutMicros, (complete.micros / fragmentMicros + 1) * fragmentMicros)
            cuts.append(Cut(index: b.index, fileOffset: nextFileOffset,
                            fragments: fragments, sequence: sequence, nextCutMicros: nextCutMicros, completeMicros: complete.micros,
                            video: video?.state, audio: audio?.state,
                            audioNext: firstAudio?.dts ?? audio?.nextDts))
            writeMarker(TakeMarker(index: b.index, start: clock.toStream(start ?? 0), label: b.label ?? ""))
        } else {
            pendingMarkers.append(TakeMarker(index: b.index, start: clock.toStream(start ?? 0), label: b.label ?? ""))
        }
        let packets = held
        held.removeAll(keepingCapacity: true)
        defer { heldBytes.removeAll(keepingCapacity: true) }
        for h in packets {
            try heldBytes.withUnsafeBytes { all in
                let p = Packet(data: UnsafeRawBufferPointer(rebasing: all[h.range]), pts: h.pts, dts: h.dts, duration: h.duration,
                               isKeyframe: h.isKeyframe)
                if h.video { try writeVideoNow(p, video!) } else { try writeAudioNow(p, audio!) }
            }
        }
    }

    /// Appends a marker to what goes to the file next (after a complete fragment).
    func writeMarker(_ m: TakeMarker) {
        markers.append((m.index, nextFileOffset))
        sink.bytes.append(contentsOf: m.box)
    }

    /// Removes take `take` (the last begun, not take 1: a file with no take left is started
    /// again) and everything after it: the file is cut back to the take's marker, what was held
    /// of it is dropped, and each track continues where the take began. The caller gives the
    /// next take's packets from fresh encoders (the same settings): video from the removed
    /// take's first pts, audio from the returned packet time. Returns the audio packet time
    /// (encoder time base) the file's audio continues at (nil without audio).
    public func rollback(take: Int) throws -> Int64? { try lock.withLock { try rollbackLocked(take: take) } }

    private func rollbackLocked(take: Int) throws -> Int64? {
        if let failure { throw failure }
        guard !finished else { throw MediaError("MP4Writer.rollback(take: \(take)) after finish() on '\(path)'") }
        guard take >= 2 else { throw MediaError("MP4Writer.rollback(take: \(take)) on '\(path)': take 1 is undone by starting the file again") }
        pendingMarkers.removeAll { $0.index >= take }
        // The next take may start where the removed one did.
        announced = (take - 1, nil, nil)
        let pending = boundary
        boundary = nil
        held.removeAll(keepingCapacity: true)
        heldBytes.removeAll(keepingCapacity: true)
        if let b = pending, b.index == take {
            // Not cut yet: nothing of it is in the file (a held video packet is the take's only once video crossed).
            if b.videoCrossed { heldVideo = nil }
            return audio?.nextDts
        }
        guard let cut = cuts.last, cut.index == take else {
            throw MediaError("MP4Writer.rollback(take: \(take)) on '\(path)': no clean cut for that take (cuts: \(cuts.map(\.index)))")
        }
        cuts.removeLast()
        heldVideo = nil
        // The muxer's open fragment holds only the removed take: it is flushed into memory and dropped.
        let ctx = out.p
        try checkAV(av_write_frame(ctx, nil), "cannot drop the open fragment of '\(path)'")
        avio_flush(ctx.pointee.pb)
        sink.bytes.removeAll(keepingCapacity: true)
        if Sys.eintrSafe({ ftruncate(fd, off_t(cut.fileOffset)) }) != 0 || lseek(fd, off_t(cut.fileOffset), SEEK_SET) < 0 {
            let e = errno
            let err = MediaError("cannot cut '\(path)' back to take \(take) (\(cut.fileOffset) bytes): \(Errno.text(e))", systemError: e)
            failure = err
            throw err
        }
        // The cut is on the disk before the undo is answered: a power cut cannot bring the take back.
        try syncLocked("the cut back to take \(take)")
        fileEnd = cut.fileOffset
        complete.bytes = cut.fileOffset
        complete.micros = cut.completeMicros
        fragments = cut.fragments
        sequence = cut.sequence
        nextCutMicros = cut.nextCutMicros
        markers.removeAll { $0.index >= take }
        for (t, state) in [(video, cut.video), (audio, cut.audio)] {
            guard let t, let state else { continue }
            t.state = state
            // The next packet, wherever the next take puts it in the file, goes in at muxNext.
            t.realign = true
        }
        return cut.audioNext
    }
}
