internal import CFFmpeg
internal import CFFmpegShim
internal import ReelFFmpeg
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
/// - `frag_custom`: this writer cuts a fragment each `fragmentMicros` of media and hands it to the file
///   whole. With video, only a video packet later in display order than every frame written may
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
/// - The muxer writes into memory (an AVIOContext of this writer's, `Sink`); each complete fragment
///   goes to the file with one write(2). On its way a 16-byte `free` box goes in after `ftyp`
///   (`placeholder`: `MP4Finisher` turns it into a 64-bit `mdat` header at stop; with
///   `default_base_moof` every sample offset is relative to its moof, so it moves nothing), then
///   Reel's signature (`PartSignature`, a 17-byte `free` box: recovery touches no `.part` without it), and
///   after an undo each moof's `tfdt` and sequence number are set right (`FragmentRewrite`).
/// - A write to the file that fails (ENOSPC, EDQUOT, EIO, EFBIG) is final: it is kept in
///   `writeFailure` (with its errno), every later call throws it without touching the file again,
///   and `abandon()` cuts the file back to `completeBytes`, the end of its last fragment known to
///   be written whole.
///
/// - Takes. Take 1's marker goes in at the first fragment boundary. Every later take starts at a
///   *clean cut*: `beginTake` (the take's first video pts) and `beginAudioTake` (its first output
///   sample) announce it; from then on a packet of the new take (video: pts at or after the start,
///   and everything after the first such; audio: a packet holding any sample at or after the start)
///   is held back until every track has reached the take. Then the fragment is cut, the take's
///   `TakeMarker` (a top-level `free` box: index, start in the clock track's timescale, label) is
///   written, and the held packets follow. Everything before the marker belongs to earlier takes,
///   everything after it to this one or later (the pipeline gives each take's video a fresh x264
///   after draining the last, so no frame refers across). Readers skip `free` boxes; `MP4Finisher`
///   turns the markers into chapters.
/// - `rollback(take:)` (undo) cuts the file back to the take's marker (ftruncate: nothing kept is
///   rewritten), drops what was held of it, and restores every track's state to the cut. The
///   muxer's own clock cannot go back, so from then on each track's packets reach it `shift` ticks
///   later (set by the track's first packet after the undo, which goes in where the muxer's clock
///   is) and `FragmentRewrite` moves each fragment's `tfdt` back by as much before it reaches the
///   file: a crash at any point leaves only fragments with true times.
///
/// Note: FFmpeg 5.1's demuxer applies a fragmented file's edit list as a plain time offset, so ffprobe
/// shows the audio stream starting at -1024/rate (the priming packet) instead of skipping it; the
/// samples still land on the right times (input sample 0 at 0), which the tests check by decoding.
/// @unchecked Sendable: every public call runs under `lock` (the pipeline writes video, the AAC
/// thread audio); `onFragmentWritten` is set before the first packet and only read after.
public final class MP4Writer: @unchecked Sendable {
    public static let movflags = "empty_moov+delay_moov+frag_custom+default_base_moof+skip_trailer"
    /// The box written right after ftyp: `free`, 16 bytes, the room for a 64-bit `mdat` header.
    public static let placeholder: [UInt8] = [0, 0, 0, 16, 0x66, 0x72, 0x65, 0x65, 0, 0, 0, 0, 0, 0, 0, 0]
    /// What goes in after `ftyp`, before any media: the placeholder, then Reel's signature
    /// (`PartSignature`), by which start-up recovery knows the file for one of Reel's.
    public static let afterFtyp: [UInt8] = placeholder + PartSignature.box
    /// Media time between fragment cuts, in microseconds: at most this much (plus the encoders' delay)
    /// is lost if the process dies.
    public let fragmentMicros: Int64
    /// Audio this far past the last video packet means the video has stopped coming: audio then
    /// cuts fragments too (x264's delay is at most a few seconds at any preset and frame rate Reel offers).
    static let videoStallMicros: Int64 = 5_000_000
    /// Packets held for a take's clean cut beyond this many bytes or `videoStallMicros` of media
    /// mean a track is not reaching the take (a source that stopped): the cut is made without it.
    static let heldLimitBytes = 16 << 20

    /// Where the muxer writes: memory, handed to the file one fragment at a time.
    /// A class: the AVIOContext's callback reaches it through an unretained pointer (the writer owns it).
    final class Sink {
        var bytes: [UInt8] = []
        init() { bytes.reserveCapacity(1 << 20) }
    }

    final class Track {
        let index: Int32
        let trackID: UInt32
        let timeBase: Rational      // the encoder's; packets arrive in it
        var streamTimeBase = AVRational(num: 0, den: 1)
        var lastDts: Int64? = nil
        /// The largest pts written (in `timeBase`).
        var maxPts: Int64? = nil
        /// The latest presentation end (pts + duration) written, in microseconds.
        var endMicros: Int64? = nil
        /// Where the next packet's dts follows on from: the last one's dts + duration (encoder time base).
        var nextDts: Int64? = nil
        /// Ticks (stream time base) the muxer's clock runs ahead of the file's: what undos removed.
        var shift: Int64 = 0
        /// Where the muxer's clock is: the last packet's dts + duration given to it (stream time base).
        var muxNext: Int64 = 0
        /// Set by an undo: the next packet's dts, whatever it is, sets `shift` so that it reaches the
        /// muxer at `muxNext`. (Not the undone take's first dts: when the take's first frames were
        /// dropped before the encoder, the next take's come earlier than that, and the muxer
        /// refused them as going back.)
        var realign = false
        let name: String
        init(index: Int32, timeBase: Rational, name: String) {
            self.index = index; self.trackID = UInt32(index) + 1; self.timeBase = timeBase; self.name = name
        }
        /// A time in `timeBase` in the stream's time base (the track's media timescale once the header is out).
        func toStream(_ x: Int64) -> Int64 {
            let stb = streamTimeBase
            return timeBase.num == Int64(stb.num) && timeBase.den == Int64(stb.den) ? x
                : rescale(x, timeBase.num * Int64(stb.den), timeBase.den * Int64(stb.num))
        }
        struct State { var lastDts: Int64?; var maxPts: Int64?; var endMicros: Int64?; var nextDts: Int64? }
        var state: State {
            get { State(lastDts: lastDts, maxPts: maxPts, endMicros: endMicros, nextDts: nextDts) }
            set { lastDts = newValue.lastDts; maxPts = newValue.maxPts; endMicros = newValue.endMicros; nextDts = newValue.nextDts }
        }
    }


    // The writer's state. What is not public is internal rather than private only so that its
    // extensions (MP4Writer+Fragments.swift, MP4Writer+Takes.swift) reach it; nothing else in
    // ReelMedia touches it, and every public call holds `lock` while it does.
    public let path: String
    /// Audio samples a take's audio boundary leads its first sample by (see `init`).
    public let audioLead: Int64
    /// Every public call runs whole under it: the pipeline thread writes video while the AAC
    /// thread writes audio. Each track's packets still go in in the order its one writer hands
    /// them over, and a cut is decided under the lock from the tracks' state at that instant.
    let lock = Monitor()
    let out: OutputContext
    let packet: AVPacketBox   // reused for every packet
    let sink = Sink()
    let fd: Int32
    var fileEnd: Int64 = 0
    var placeholderIn = false
    var sequence: UInt32 = 0
    var video: Track?
    var audio: Track?
    var nextCutMicros: Int64
    /// The video packet waiting for the next one (its bytes in `heldVideoBytes`, reused).
    var heldVideo: (pts: Int64, dts: Int64, duration: Int64, isKeyframe: Bool, mayCut: Bool)?
    var heldVideoBytes: [UInt8] = []
    var fragments = 0
    var finished = false
    private var closed = false
    /// The first failed write to the file; once set, nothing more is written.
    public var writeFailure: MediaError? { lock.withLock { failure } }
    var failure: MediaError?
    /// Bytes at the start of the file known to be written whole: header, movie box and complete
    /// fragments (0 until the first fragment is out). A file cut here plays.
    public var completeBytes: Int64 { lock.withLock { complete.bytes } }
    var complete: (bytes: Int64, micros: Int64) = (0, 0)
    /// Media time those bytes hold, in microseconds (where every track has data).
    public var completeMicros: Int64 { lock.withLock { complete.micros } }
    /// Called after each fragment has been handed to the file (write(2) done, not yet synced),
    /// with the lock held, on whichever thread's packet cut it: the owner's chance to have it
    /// synced (see reeld's FileSyncer). Set before the first packet, never after.
    public var onFragmentWritten: (() -> Void)?
    /// How the writer gets its file onto the disk (fdatasync); an undo's cut is synced here
    /// before `rollback` returns (fragments are synced by the owner, see `onFragmentWritten`).
    /// Tests replace it to see when it is called. Set before the first call, never after.
    var syncFile: @Sendable (Int32) -> Int32 = { fdatasync($0) }
    /// Packets whose DTS had to be forced strictly increasing (should stay 0).
    public var dtsFixes: Int { lock.withLock { fixes } }
    var fixes = 0
    /// Take 1's marker, waiting for the first fragment boundary.
    var pendingMarkers: [TakeMarker] = []
    var boundary: Boundary?
    /// The last take announced and, per track, the latest start announced (takes come in media order).
    var announced: (index: Int, video: Int64?, audio: Int64?) = (0, nil, nil)
    var held: [Held] = []
    var heldBytes: [UInt8] = []
    var cuts: [Cut] = []
    /// Each take marker written: the take's index and the file offset of its `free` box (where
    /// an undo of that take cuts the file back to).
    public var takeMarkers: [(index: Int, fileOffset: Int64)] { lock.withLock { markers } }
    var markers: [(index: Int, fileOffset: Int64)] = []

    /// Bytes handed to the file so far (all of them once `finish()` returned).
    public var bytesWritten: Int64 { lock.withLock { fileEnd } }

    /// The file offset the next byte the muxer has written goes to (the placeholder counted
    /// before it is in: it goes in with the first bytes).
    var nextFileOffset: Int64 {
        fileEnd + Int64(sink.bytes.count) + (placeholderIn ? 0 : Int64(Self.afterFtyp.count))
    }

    /// Creates `path` (never through a link, never over a file) and writes the file header; with
    /// `restart`, empties the writer's own file already at `path` instead (an undo of every take:
    /// same inode; a link there is refused). The stream parameters come from the encoders.
    public convenience init(path: String, video v: H264Encoder?, audio a: AACEncoder?, fragmentMicros: Int64 = 1_000_000,
                            restart: Bool = false) throws {
        try self.init(path: path, video: v, audioStream: a?.stream, fragmentMicros: fragmentMicros, restart: restart)
    }

    /// `audioLead`: audio samples a take's audio boundary comes before its first sample (the
    /// pipeline's crossfade reaches back that far, so an undo must replace the packets from there).
    public init(path: String, video v: H264Encoder?, audioStream a: AACStream?, fragmentMicros: Int64 = 1_000_000,
                restart: Bool = false, audioLead: Int64 = 0) throws {
        self.audioLead = max(0, audioLead)
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
        // Created, never opened: not through a link planted at its name, not over a file there.
        let fd: Int32
        do {
            fd = restart ? try Sys.retrying("open") { open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC) }
                         : try Sys.createExclusive(path, mode: 0o666)
        } catch {
            let e = error.errno
            if e == EEXIST {
                throw MediaError(Sys.createFailure(path, errno: e, fix: "Reel never writes through a link or over a file; choose another name"), systemError: e)
            }
            throw MediaError("cannot open '\(path)' for writing: \(Errno.text(e)) (\(Self.openFailureHint(errno: e, dir: directory(of: path))))", systemError: e)
        }
        self.fd = fd

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
            ChannelLayout.set(&par.pointee.ch_layout, channels: a.format.channels)
            par.pointee.frame_size = Int32(a.frameSize)
            par.pointee.initial_padding = Int32(a.initialPadding)
            audio = Track(index: st.pointee.index, timeBase: a.timeBase, name: "audio")
        }

        let size: Int32 = 32768
        // Safe: the AVIOContext owns this buffer from here on; `OutputContext.freeIO` frees both.
        guard let buffer = av_malloc(Int(size))?.assumingMemoryBound(to: UInt8.self),
              let pb = avio_alloc_context(buffer, size, 1, Unmanaged.passUnretained(sink).toOpaque(), nil, { opaque, buf, n in
                  // Safe: opaque is the writer's Sink, alive while the context is (closeIO frees the context
                  // before the writer lets go of the sink); buf holds n bytes for this call.
                  let sink = Unmanaged<Sink>.fromOpaque(opaque!).takeUnretainedValue()
                  sink.bytes.append(contentsOf: UnsafeBufferPointer(start: buf, count: Int(n)))
                  return n
              }, nil) else {
            Glibc.close(fd)
            throw MediaError("\(what): out of memory for the output buffer")
        }
        ctx.pointee.pb = pb
        var opts: OpaquePointer? = nil
        defer { av_dict_free(&opts) }
        do {
            try checkAV(av_dict_set(&opts, "movflags", Self.movflags, 0), "\(what): cannot set movflags")
            // Empty edits (a track starting after 0) are in the movie timescale; 90 kHz keeps them exact for video.
            try checkAV(av_dict_set(&opts, "movie_timescale", "90000", 0), "\(what): cannot set movie_timescale")
            try checkAV(avformat_write_header(ctx, &opts), "\(what): cannot write the MP4 header")
            if let left = av_dict_get(opts, "", nil, AV_DICT_IGNORE_SUFFIX) {
                throw MediaError("\(what): the mp4 muxer ignored option '\(String(cString: left.pointee.key))'")
            }
        } catch {
            closeIO()
            throw error
        }
        // The muxer may pick its own stream time bases; packets are rescaled into them.
        // Safe: t.index came from avformat_new_stream, so it is < nb_streams.
        for t in [video, audio].compactMap({ $0 }) { t.streamTimeBase = ctx.pointee.streams[Int(t.index)]!.pointee.time_base }
    }

    deinit { closeIO() }

    /// Frees the AVIOContext (writing nothing more) and closes the file. Idempotent.
    private func closeIO() {
        guard !closed else { return }
        closed = true
        out.freeIO()
        Glibc.close(fd)
    }

    /// What to do when the file cannot be created in `dir`, by the reason (an errno value):
    /// Reel's one errno table (`Errno.storage`) says what it means there and the fix.
    static func openFailureHint(errno code: Int32, dir: String) -> String {
        let (meaning, fix) = Errno.storage(code, dir: dir)
        return "\(meaning): \(fix)"
    }


    /// Writes the last fragment and closes the file. Does not rename it.
    /// `videoEnd`: where the video track ends (pts, video time base) when that is past its last
    /// frame's end (a camera gap before the stop): the last frame lasts until there.
    public func finish(videoEnd: Int64? = nil) throws { try lock.withLock { try finishLocked(videoEnd: videoEnd) } }

    private func finishLocked(videoEnd: Int64? = nil) throws {
        if let failure { throw failure }
        guard !finished else { return }
        guard !closed else { throw MediaError("MP4Writer.finish on '\(path)': the file was already abandoned") }
        if let b = boundary { try cutTake(b) }
        if let h = heldVideo, let video {
            let extra = videoEnd.map { max(0, $0 - ((video.maxPts ?? h.pts) + h.duration)) } ?? 0
            try writeHeldVideo(h, duration: h.duration + extra, video)
        }
        let ctx = out.p
        // The last fragment explicitly (a NULL packet flushes with frag_custom), then the trailer,
        // which with skip_trailer writes nothing more.
        try checkAV(av_write_frame(ctx, nil), "cannot write the last fragment of '\(path)'")
        try checkAV(av_write_trailer(ctx), "cannot finish MP4 file '\(path)'")
        avio_flush(ctx.pointee.pb)
        for m in pendingMarkers { writeMarker(m) }   // takes begun since the last boundary: after the last fragment
        pendingMarkers.removeAll()
        try commit()
        finished = true
        complete.bytes = fileEnd
        complete.micros = coveredMicros
        closeIO()
    }

    /// Gets what was written and cut so far onto the disk (fdatasync): for the pipeline after it
    /// started the file again (undo of take 1), so the emptied file is what a power cut leaves.
    public func sync(_ what: String) throws { try lock.withLock { try syncLocked(what) } }

    func syncLocked(_ what: String) throws {
        if let failure { throw failure }
        if Sys.eintrSafe({ syncFile(fd) }) != 0 {
            let e = errno
            let err = MediaError("cannot sync '\(path)' to disk after \(what): \(Errno.text(e))", systemError: e)
            failure = err
            throw err
        }
    }

    /// Records a failure to get the file onto the disk that was seen elsewhere (a failed fdatasync):
    /// from now on the writer behaves as after a failed write.
    public func markFailed(_ message: String, systemError: Int32) { lock.withLock { markFailedLocked(message, systemError: systemError) } }

    private func markFailedLocked(_ message: String, systemError: Int32) {
        if failure == nil { failure = MediaError(message, systemError: systemError) }
    }

    /// Gives up on the file after a failure: closes it without writing anything more and truncates
    /// it to `completeBytes`, so it ends with its last complete fragment. Returns the bytes and media
    /// time kept (0 bytes: nothing playable; the caller removes the file). Throws only if the file
    /// cannot be truncated.
    @discardableResult
    public func abandon() throws -> (bytes: Int64, micros: Int64) { try lock.withLock { try abandonLocked() } }

    private func abandonLocked() throws -> (bytes: Int64, micros: Int64) {
        if !finished, !closed {
            // A writer abandoned without a failed write (the caller's own error) has nothing worth
            // keeping after completeBytes either: it is cut off.
            finished = true
            let rc = Sys.eintrSafe { ftruncate(fd, off_t(complete.bytes)) }
            let e = errno
            closeIO()
            if rc != 0 {
                throw MediaError("cannot cut '\(path)' back to its last complete fragment (\(complete.bytes) bytes): \(Errno.text(e))",
                                 systemError: e)
            }
        }
        return complete
    }
}
