internal import CFFmpeg
internal import CFFmpegShim
import Glibc
import ReelCore
import ReelSystem

/// Fragmented MP4 (libavformat "mp4" muxer) for one H.264 and/or one AAC stream.
///
/// - movflags `empty_moov+delay_moov+frag_custom+default_base_moof`: the moov carries no samples, so
///   every sample lives in a moof/mdat fragment and a file cut short anywhere after the first fragment
///   plays up to its last complete fragment. `delay_moov` postpones the moov until the first fragment,
///   when the first packets are known, so the edit lists hide x264's negative initial DTS and AAC's
///   1024 priming samples: both tracks present from time 0 and input sample 0 plays with video pts 0.
///   A track whose first packet starts later gets an empty edit (movie timescale 90 kHz, so exact for video).
/// - `frag_custom`: this writer cuts a fragment each `fragmentMicros` of media and `avio_flush`es it to
///   the file. With video, only a video packet later in display order than every frame written may
///   start a fragment (x264 sends B-frames after the frame that follows them), so no fragment ends
///   with a hole where B-frames belong: a file cut back or recovered there plays every frame to its
///   end. The first fragment (and the moov) goes out at the first such packet once both tracks have
///   data, so a crash soon after the start still leaves a playable file. Audio is written as it
///   comes: x264 hands a frame out a lookahead late (1.3 s of media at 15 fps), so a fragment holds
///   audio that far past its video, and a file cut short keeps that audio rather than trimming it.
///   Audio may cut fragments itself only when the video has fallen `videoStallMicros` behind (a
///   camera that hangs), so fragments keep coming.
/// - Each video packet is held until the next one arrives and is written with its true duration
///   (next dts - its dts), not x264's nominal one frame: a fragment's last sample takes its
///   duration from the packet, and the next fragment starts where the durations sum to, so a
///   frame dropped just before a cut would move every later frame one frame early (FFmpeg then
///   finds two frames at one pts). The last packet is written by `finish()`.
/// - `finish()` writes the last fragment only; nothing is rewritten or moved. `skip_trailer`: no
///   `mfra` random-access index at the end, because libavformat keeps 40 bytes per fragment and
///   track in memory for it (1.1 MiB over two hours of 0.5 s fragments, growth a long recording
///   cannot afford), and because a file recovered after a crash has none either: every file Reel
///   leaves has the same shape, ftyp, moov, then moof/mdat pairs. Players find the fragments by
///   walking the top-level boxes, as they must for any fragmented file cut short.
///   A writer released without `finish()` just closes the file: complete fragments play, the open one is lost.
/// - A write to the file that fails (ENOSPC, EDQUOT, EIO: the AVIOContext's `error`, checked after every
///   muxer call and flush, since avio buffers) is final: it is kept in `writeFailure` (with its errno),
///   every later call throws it without touching the file again, and `abandon()` cuts the file back to
///   `completeBytes`, the end of its last fragment known to be written whole.
///
/// - A 16-byte `free` box follows `ftyp` (`placeholder`, put in by a wrapper around the AVIOContext's write
///   callback): `MP4Finisher` turns it into a 64-bit `mdat` header at stop. With `default_base_moof` every
///   sample offset in a moof is relative to that moof, so the 16 bytes move nothing the muxer wrote.
///   `completeBytes`, `bytesWritten` and `abandon()` count in file offsets (the muxer's plus 16).
///
/// - Takes (`beginTake`): a `TakeMarker` (a top-level `free` box) goes into the file at the next fragment
///   boundary, after a complete fragment's mdat and before the next moof (or after the last fragment at
///   `finish()`), so it is counted in `completeBytes` and synced with that fragment; `takeMarkers` keeps
///   where each one is. Readers skip `free` boxes, so the file plays exactly as without them;
///   `MP4Finisher` turns them into chapters.
///
/// Note: FFmpeg 5.1's demuxer applies a fragmented file's edit list as a plain time offset, so ffprobe
/// shows the audio stream starting at -1024/rate (the priming packet) instead of skipping it; the
/// samples still land on the right times (input sample 0 at 0), which the tests check by decoding.
public final class MP4Writer {
    public static let movflags = "empty_moov+delay_moov+frag_custom+default_base_moof+skip_trailer"
    /// The box written right after ftyp: `free`, 16 bytes, the room for a 64-bit `mdat` header.
    public static let placeholder: [UInt8] = [0, 0, 0, 16, 0x66, 0x72, 0x65, 0x65, 0, 0, 0, 0, 0, 0, 0, 0]
    /// Media time between fragment cuts, in microseconds: at most this much (plus the encoders' delay)
    /// is lost if the process dies.
    public let fragmentMicros: Int64
    /// Audio this far past the last video packet means the video has stopped coming: audio then
    /// cuts fragments too (x264's delay is at most a few seconds at any preset and frame rate Reel offers).
    static let videoStallMicros: Int64 = 5_000_000

    private final class Track {
        let index: Int32
        let timeBase: Rational      // the encoder's; packets arrive in it
        var streamTimeBase = AVRational(num: 0, den: 1)
        var lastDts: Int64? = nil
        /// The largest pts written (in `timeBase`).
        var maxPts: Int64? = nil
        /// The latest presentation end (pts + duration) written, in microseconds.
        var endMicros: Int64? = nil
        let name: String
        init(index: Int32, timeBase: Rational, name: String) { self.index = index; self.timeBase = timeBase; self.name = name }
        /// A time in `timeBase` in the stream's time base (the track's media timescale once the header is out).
        func toStream(_ x: Int64) -> Int64 {
            let stb = streamTimeBase
            return timeBase.num == Int64(stb.num) && timeBase.den == Int64(stb.den) ? x
                : rescale(x, timeBase.num * Int64(stb.den), timeBase.den * Int64(stb.num))
        }
    }

    public let path: String
    private let out: OutputContext
    private let packet: AVPacketBox   // reused for every packet
    private var video: Track?
    private var audio: Track?
    private var nextCutMicros: Int64
    /// The video packet waiting for the next one (its bytes in `heldVideoBytes`, reused).
    private var heldVideo: (pts: Int64, dts: Int64, duration: Int64, isKeyframe: Bool, mayCut: Bool)?
    private var heldVideoBytes: [UInt8] = []
    private var fragments = 0
    private var finished = false
    private var finalBytes: Int64 = 0
    /// The first failed write to the file; once set, nothing more is written.
    public private(set) var writeFailure: MediaError?
    /// Bytes at the start of the file known to be written whole: header, movie box and complete
    /// fragments (0 until the first fragment is out). A file cut here plays.
    public private(set) var completeBytes: Int64 = 0
    /// Media time those bytes hold, in microseconds (where every track has data).
    public private(set) var completeMicros: Int64 = 0
    /// Called on the writing thread after each fragment has been handed to the file (write(2)
    /// done, not yet synced): the owner's chance to have it synced (see reeld's FileSyncer).
    public var onFragmentWritten: (() -> Void)?
    /// Packets whose DTS had to be forced strictly increasing (should stay 0).
    public private(set) var dtsFixes = 0
    /// Takes begun whose marker waits for the next fragment boundary.
    private var pendingMarkers: [TakeMarker] = []
    /// Each take marker written: the take's index and the file offset of its `free` box (where
    /// an undo of that take would cut the file back to).
    public private(set) var takeMarkers: [(index: Int, fileOffset: Int64)] = []

    /// Bytes handed to the file so far (all of them once `finish()` returned).
    public var bytesWritten: Int64 {
        if finished { return finalBytes }
        guard let pb = out.p.pointee.pb else { return completeBytes }
        return filePos(avio_tell(pb))
    }

    /// A muxer position as a file offset: the placeholder is in once the first fragment (with ftyp) is out.
    private func filePos(_ muxerPos: Int64) -> Int64 {
        creel_avio_box_written(out.p.pointee.pb) == 1 ? muxerPos + Int64(Self.placeholder.count) : muxerPos
    }

    /// Opens `path` (created or truncated) and writes the file header. The stream parameters come from the encoders.
    public init(path: String, video v: H264Encoder?, audio a: AACEncoder?, fragmentMicros: Int64 = 1_000_000) throws {
        let what = "cannot create MP4 file '\(path)'"
        guard v != nil || a != nil else { throw MediaError("\(what): no video and no audio encoder given; pass at least one") }
        guard fragmentMicros > 0 else { throw MediaError("\(what): fragmentMicros \(fragmentMicros) must be positive") }
        self.fragmentMicros = fragmentMicros
        nextCutMicros = fragmentMicros
        self.path = path
        let out = try OutputContext(format: "mp4", path: path, what)
        let ctx = out.p
        self.out = out
        packet = try AVPacketBox(what)

        func newStream(_ timeBase: Rational, extradata: [UInt8]) throws(MediaError) -> UnsafeMutablePointer<AVStream> {
            guard let st = avformat_new_stream(ctx, nil) else { throw MediaError("\(what): out of memory adding a stream") }
            st.pointee.time_base = AVRational(num: Int32(timeBase.num), den: Int32(timeBase.den))
            guard let ex = av_mallocz(extradata.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) else {
                throw MediaError("\(what): out of memory copying codec extradata")
            }
            // Safe: ex has room for extradata.count bytes plus padding; codecpar owns and frees it.
            ex.copyMemory(from: extradata, byteCount: extradata.count)
            st.pointee.codecpar.pointee.extradata = ex.assumingMemoryBound(to: UInt8.self)
            st.pointee.codecpar.pointee.extradata_size = Int32(extradata.count)
            return st
        }
        if let v {
            let st = try newStream(v.timeBase, extradata: v.extradata)
            let par = st.pointee.codecpar!
            par.pointee.codec_type = AVMEDIA_TYPE_VIDEO
            par.pointee.codec_id = AV_CODEC_ID_H264
            par.pointee.width = Int32(v.width); par.pointee.height = Int32(v.height)
            par.pointee.format = AV_PIX_FMT_YUV420P.rawValue
            st.pointee.avg_frame_rate = AVRational(num: Int32(v.fps.num), den: Int32(v.fps.den))
            video = Track(index: st.pointee.index, timeBase: v.timeBase, name: "video")
        }
        if let a {
            let st = try newStream(a.timeBase, extradata: a.extradata)
            let par = st.pointee.codecpar!
            par.pointee.codec_type = AVMEDIA_TYPE_AUDIO
            par.pointee.codec_id = AV_CODEC_ID_AAC
            par.pointee.profile = FF_PROFILE_AAC_LOW
            par.pointee.sample_rate = Int32(a.format.sampleRate)
            av_channel_layout_default(&par.pointee.ch_layout, Int32(a.format.channels))
            par.pointee.frame_size = Int32(a.frameSize)
            par.pointee.initial_padding = Int32(a.initialPadding)
            audio = Track(index: st.pointee.index, timeBase: a.timeBase, name: "audio")
        }

        let rc = creel_avio_open_with_box(&ctx.pointee.pb, path, Self.placeholder, Int32(Self.placeholder.count))
        if rc < 0 {
            throw MediaError("cannot open '\(path)' for writing: \(avErrorText(rc)) (\(Self.openFailureHint(errno: -rc, dir: directory(of: path))))", systemError: -rc)
        }
        var opts: OpaquePointer? = nil
        defer { av_dict_free(&opts) }
        try checkAV(av_dict_set(&opts, "movflags", Self.movflags, 0), "\(what): cannot set movflags")
        // Empty edits (a track starting after 0) are in the movie timescale; 90 kHz keeps them exact for video.
        try checkAV(av_dict_set(&opts, "movie_timescale", "90000", 0), "\(what): cannot set movie_timescale")
        try checkAV(avformat_write_header(ctx, &opts), "\(what): cannot write the MP4 header")
        if let left = av_dict_get(opts, "", nil, AV_DICT_IGNORE_SUFFIX) {
            throw MediaError("\(what): the mp4 muxer ignored option '\(String(cString: left.pointee.key))'")
        }
        // The muxer may pick its own stream time bases; packets are rescaled into them.
        // Safe: t.index came from avformat_new_stream, so it is < nb_streams.
        for t in [video, audio].compactMap({ $0 }) { t.streamTimeBase = ctx.pointee.streams[Int(t.index)]!.pointee.time_base }
    }

    /// What to do when the file cannot be created in `dir`, by the reason (an errno value):
    /// Reel's one errno table (`Errno.storage`) says what it means there and the fix.
    static func openFailureHint(errno code: Int32, dir: String) -> String {
        let (meaning, fix) = Errno.storage(code, dir: dir)
        return "\(meaning): \(fix)"
    }

    /// Writes one H.264 packet (times in the video encoder's time base), in the encoder's output order.
    public func writeVideo(_ p: Packet) throws {
        guard let video else { throw MediaError("MP4Writer.writeVideo on '\(path)': the file was created without video") }
        if let writeFailure { throw writeFailure }
        // Later in display order than every frame before it: those have no hole, so a fragment may end there.
        let mayCut = video.maxPts.map { p.pts > $0 } ?? true
        video.maxPts = max(video.maxPts ?? p.pts, p.pts)
        if let h = heldVideo { try writeHeldVideo(h, duration: max(1, p.dts - h.dts), video) }
        heldVideoBytes.removeAll(keepingCapacity: true)
        heldVideoBytes.append(contentsOf: p.data)
        heldVideo = (p.pts, p.dts, p.duration, p.isKeyframe, mayCut)
    }

    private func writeHeldVideo(_ h: (pts: Int64, dts: Int64, duration: Int64, isKeyframe: Bool, mayCut: Bool),
                                duration: Int64, _ video: Track) throws {
        heldVideo = nil
        try heldVideoBytes.withUnsafeBytes { bytes in
            try write(Packet(data: bytes, pts: h.pts, dts: h.dts, duration: duration, isKeyframe: h.isKeyframe),
                      video, mayCut: h.mayCut)
        }
    }

    /// Writes one AAC packet (times in the audio encoder's time base), in the encoder's output order.
    public func writeAudio(_ p: Packet) throws {
        guard let audio else { throw MediaError("MP4Writer.writeAudio on '\(path)': the file was created without audio") }
        var mayCut = true
        if let video {
            // Only when the video has stopped coming (or has not come at all for that long).
            let videoDts = video.lastDts.map { micros($0, video) } ?? 0
            mayCut = micros(p.dts, audio) - videoDts > Self.videoStallMicros
        }
        try write(p, audio, mayCut: mayCut)
    }

    /// A take begins: `start` is its first frame's pts in the video encoder's time base (without
    /// video: its first sample's output sample number, in the audio encoder's time base); 0 is the
    /// file's first frame. Its marker (index, start in the chapter clock: the track's media
    /// timescale, label cut to `TakeMarker.maxLabelBytes`) is written at the next fragment boundary.
    public func beginTake(index: Int, label: String?, start: Int64) throws {
        if let writeFailure { throw writeFailure }
        guard !finished else { throw MediaError("MP4Writer.beginTake(\(index)) after finish() on '\(path)'") }
        guard index >= 1, start >= 0 else {
            throw MediaError("MP4Writer.beginTake on '\(path)': take \(index) at \(start); takes count from 1 and start at 0 or later")
        }
        let clock = (video ?? audio)!
        pendingMarkers.append(TakeMarker(index: index, start: clock.toStream(start), label: label ?? ""))
    }

    /// Writes the markers of the takes begun since the last fragment boundary (the caller flushes).
    private func writeMarkers() {
        guard !pendingMarkers.isEmpty, let pb = out.p.pointee.pb else { return }
        for m in pendingMarkers {
            let offset = filePos(avio_tell(pb))
            let box = m.box
            // Safe: avio_write copies box.count bytes from the array's storage during the call.
            box.withUnsafeBufferPointer { avio_write(pb, $0.baseAddress, Int32($0.count)) }
            takeMarkers.append((m.index, offset))
        }
        pendingMarkers.removeAll()
    }

    private func micros(_ x: Int64, _ t: Track) -> Int64 { rescale(x, 1_000_000 * t.timeBase.num, t.timeBase.den) }

    /// Writes the last fragment and closes the file. Does not rename it.
    public func finish() throws {
        if let writeFailure { throw writeFailure }
        guard !finished else { return }
        let ctx = out.p
        guard ctx.pointee.pb != nil else { throw MediaError("MP4Writer.finish on '\(path)': the file was already abandoned") }
        if let h = heldVideo, let video { try writeHeldVideo(h, duration: h.duration, video) }
        // The last fragment explicitly (a NULL packet flushes with frag_custom), then the trailer,
        // which with skip_trailer writes nothing more.
        try checkWrite(av_write_frame(ctx, nil), "cannot write the last fragment of '\(path)'")
        try checkWrite(av_write_trailer(ctx), "cannot finish MP4 file '\(path)'")
        writeMarkers()   // takes begun since the last boundary: after the last fragment
        finished = true
        let muxerEnd = avio_tell(ctx.pointee.pb)
        avio_flush(ctx.pointee.pb)
        try checkWrite(0, "cannot write the end of '\(path)'")
        finalBytes = muxerEnd + (creel_avio_box_written(ctx.pointee.pb) == 1 ? Int64(Self.placeholder.count) : 0)
        completeBytes = finalBytes
        completeMicros = coveredMicros
        try checkAV(creel_avio_closep(&ctx.pointee.pb), "cannot close MP4 file '\(path)'")
    }

    /// Records a failure to get the file onto the disk that was seen elsewhere (a failed fdatasync):
    /// from now on the writer behaves as after a failed write.
    public func markFailed(_ message: String, systemError: Int32) {
        if writeFailure == nil { writeFailure = MediaError(message, systemError: systemError) }
    }

    /// Gives up on the file after a failure: closes it without writing anything more (after a failed
    /// write libavformat writes no more buffered bytes) and truncates it to `completeBytes`, so it ends
    /// with its last complete fragment. Returns the bytes and media time kept (0 bytes: nothing
    /// playable; the caller removes the file). Throws only if the file cannot be truncated.
    @discardableResult
    public func abandon() throws -> (bytes: Int64, micros: Int64) {
        let ctx = out.p
        if !finished, ctx.pointee.pb != nil {
            // A writer abandoned without a failed write (the caller's own error) has nothing to flush
            // worth keeping either: whatever follows completeBytes is cut off below.
            creel_avio_closep(&ctx.pointee.pb)
            finished = true
            finalBytes = completeBytes
            if truncate(path, off_t(completeBytes)) != 0 {
                let e = errno
                throw MediaError("cannot cut '\(path)' back to its last complete fragment (\(completeBytes) bytes): \(Errno.text(e))",
                                 systemError: e)
            }
        }
        return (completeBytes, completeMicros)
    }

    /// Throws the AVIOContext's error as the writer's final `writeFailure` if a write to the file failed,
    /// else a plain `MediaError` for a negative `rc` (a muxer error, the file untouched).
    private func checkWrite(_ rc: Int32, _ what: @autoclosure () -> String) throws(MediaError) {
        if let pb = out.p.pointee.pb, pb.pointee.error < 0 {
            let code = pb.pointee.error
            // AVERROR(e) is -e on Linux; FFmpeg's own codes (FFERRTAG) are far below -4096.
            let e = MediaError("\(what()): \(avErrorText(code))", systemError: code > -4096 ? -code : nil)
            writeFailure = e
            throw e
        }
        try checkAV(rc, what())
    }

    /// Where every track has been written up to (the smallest presentation end), in microseconds.
    private var coveredMicros: Int64 {
        let ends = [video, audio].compactMap { $0 }.map { $0.endMicros ?? 0 }
        return max(0, ends.min() ?? 0)
    }

    private func write(_ p: Packet, _ t: Track, mayCut: Bool) throws {
        if let writeFailure { throw writeFailure }
        guard !finished else { throw MediaError("MP4Writer: \(t.name) packet after finish() on '\(path)'") }
        var dts = p.dts, pts = p.pts
        if let last = t.lastDts, dts <= last {
            dts = last + 1
            pts = max(pts, dts)
            dtsFixes += 1
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
        pkt.pointee.pts = toStream(pts)
        pkt.pointee.dts = toStream(dts)
        pkt.pointee.duration = toStream(p.duration)
        pkt.pointee.flags = p.isKeyframe ? AV_PKT_FLAG_KEY : 0
        pkt.pointee.stream_index = t.index
        let rc = av_write_frame(out.p, pkt)
        pkt.pointee.data = nil; pkt.pointee.size = 0
        try checkWrite(rc, "cannot write a \(t.name) packet (dts \(dts)) to '\(path)'")
        let end = micros(pts + p.duration, t)
        t.endMicros = max(t.endMicros ?? end, end)
    }

    /// Ends the current fragment and pushes it to the file.
    private func cutFragment() throws {
        let ctx = out.p
        // With delay_moov the first forced flush writes only the moov; the second writes the fragment.
        for _ in 0..<(fragments == 0 ? 2 : 1) {
            try checkWrite(av_write_frame(ctx, nil), "cannot write a fragment to '\(path)'")
        }
        fragments += 1
        writeMarkers()
        avio_flush(ctx.pointee.pb)
        try checkWrite(0, "cannot write to '\(path)'")
        // Everything up to here reached the file whole.
        completeBytes = filePos(avio_tell(ctx.pointee.pb))
        completeMicros = coveredMicros
        onFragmentWritten?()
    }
}
