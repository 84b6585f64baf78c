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
///   later and `FragmentRewrite` moves each fragment's `tfdt` back by as much before it reaches the
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
    private final class Sink {
        var bytes: [UInt8] = []
        init() { bytes.reserveCapacity(1 << 20) }
    }

    private final class Track {
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

    /// A take announced and not yet cut into the file.
    private struct Boundary {
        var index: Int
        var label: String?
        var videoStart: Int64?
        var audioStart: Int64?
        var videoCrossed = false
        var audioCrossed = false
    }

    /// A packet of a take held until its cut (bytes in `heldBytes`).
    private struct Held {
        var video: Bool
        var pts: Int64, dts: Int64, duration: Int64, isKeyframe: Bool
        var range: Range<Int>
    }

    /// A clean cut in the file: where take `index` begins, and what an undo of it restores.
    private struct Cut {
        var index: Int
        var fileOffset: Int64
        var fragments: Int
        var sequence: UInt32
        var nextCutMicros: Int64
        var completeMicros: Int64
        var video: Track.State?
        var audio: Track.State?
        /// The file dts (encoder time base) of the take's first packet on each track: where the
        /// next take's packets continue after an undo.
        var videoNext: Int64?
        var audioNext: Int64?
    }

    public let path: String
    /// Audio samples a take's audio boundary leads its first sample by (see `init`).
    public let audioLead: Int64
    /// Every public call runs whole under it: the pipeline thread writes video while the AAC
    /// thread writes audio. Each track's packets still go in in the order its one writer hands
    /// them over, and a cut is decided under the lock from the tracks' state at that instant.
    private let lock = Monitor()
    private let out: OutputContext
    private let packet: AVPacketBox   // reused for every packet
    private let sink = Sink()
    private let fd: Int32
    private var fileEnd: Int64 = 0
    private var placeholderIn = false
    private var sequence: UInt32 = 0
    private var video: Track?
    private var audio: Track?
    private var nextCutMicros: Int64
    /// The video packet waiting for the next one (its bytes in `heldVideoBytes`, reused).
    private var heldVideo: (pts: Int64, dts: Int64, duration: Int64, isKeyframe: Bool, mayCut: Bool)?
    private var heldVideoBytes: [UInt8] = []
    private var fragments = 0
    private var finished = false
    private var closed = false
    /// The first failed write to the file; once set, nothing more is written.
    public var writeFailure: MediaError? { lock.withLock { failure } }
    private var failure: MediaError?
    /// Bytes at the start of the file known to be written whole: header, movie box and complete
    /// fragments (0 until the first fragment is out). A file cut here plays.
    public var completeBytes: Int64 { lock.withLock { complete.bytes } }
    private var complete: (bytes: Int64, micros: Int64) = (0, 0)
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
    private var fixes = 0
    /// Take 1's marker, waiting for the first fragment boundary.
    private var pendingMarkers: [TakeMarker] = []
    private var boundary: Boundary?
    /// The last take announced and, per track, the latest start announced (takes come in media order).
    private var announced: (index: Int, video: Int64?, audio: Int64?) = (0, nil, nil)
    private var held: [Held] = []
    private var heldBytes: [UInt8] = []
    private var cuts: [Cut] = []
    /// Each take marker written: the take's index and the file offset of its `free` box (where
    /// an undo of that take cuts the file back to).
    public var takeMarkers: [(index: Int, fileOffset: Int64)] { lock.withLock { markers } }
    private var markers: [(index: Int, fileOffset: Int64)] = []

    /// Bytes handed to the file so far (all of them once `finish()` returned).
    public var bytesWritten: Int64 { lock.withLock { fileEnd } }

    /// The file offset the next byte the muxer has written goes to (the placeholder counted
    /// before it is in: it goes in with the first bytes).
    private var nextFileOffset: Int64 {
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
            av_channel_layout_default(&par.pointee.ch_layout, Int32(a.format.channels))
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

    /// Writes one H.264 packet (times in the video encoder's time base), in the encoder's output order.
    public func writeVideo(_ p: Packet) throws { try lock.withLock { try writeVideoLocked(p) } }

    private func writeVideoLocked(_ p: Packet) throws {
        guard let video else { throw MediaError("MP4Writer.writeVideo on '\(path)': the file was created without video") }
        if let failure { throw failure }
        if var b = boundary, let start = b.videoStart, b.videoCrossed || p.pts >= start {
            if !b.videoCrossed {
                // The last packet before the take gets its true duration now.
                if let h = heldVideo { try writeHeldVideo(h, duration: max(1, p.dts - h.dts), video) }
                b.videoCrossed = true
                boundary = b
            }
            try hold(p, video: true)
            return
        }
        try writeVideoNow(p, video)
    }

    private func writeVideoNow(_ p: Packet, _ video: Track) throws {
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

    private func writeAudioNow(_ p: Packet, _ audio: Track) throws {
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
    private func hold(_ p: Packet, video isVideo: Bool) throws {
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
    private func cutTake(_ b: Boundary) throws {
        boundary = nil
        let clock = (video ?? audio)!
        let start = video != nil ? b.videoStart : b.audioStart
        let firstVideo = held.first(where: { $0.video }), firstAudio = held.first(where: { !$0.video })
        // Each track must have data before the first fragment (the moov's edit lists come from it).
        let canCut = [video, audio].allSatisfy { $0 == nil || $0!.lastDts != nil } && heldVideo == nil
        if canCut {
            try cutFragment()
            nextCutMicros = max(nextCutMicros, (complete.micros / fragmentMicros + 1) * fragmentMicros)
            cuts.append(Cut(index: b.index, fileOffset: nextFileOffset,
                            fragments: fragments, sequence: sequence, nextCutMicros: nextCutMicros, completeMicros: complete.micros,
                            video: video?.state, audio: audio?.state,
                            videoNext: firstVideo?.dts, audioNext: firstAudio?.dts ?? audio?.nextDts))
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
    private func writeMarker(_ m: TakeMarker) {
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
        for (t, state, next) in [(video, cut.video, cut.videoNext), (audio, cut.audio, cut.audioNext)] {
            guard let t, let state else { continue }
            t.state = state
            // The next packet continues at `next` in the file and at muxNext in the muxer.
            let fileNext = next ?? (state.lastDts.map { $0 + 1 } ?? 0)
            t.shift = t.muxNext - t.toStream(fileNext)
        }
        return cut.audioNext
    }

    private func micros(_ x: Int64, _ t: Track) -> Int64 { rescale(x, 1_000_000 * t.timeBase.num, t.timeBase.den) }

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

    private func syncLocked(_ what: String) throws {
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

    /// Where every track has been written up to (the smallest presentation end), in microseconds.
    private var coveredMicros: Int64 {
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
    private func cutFragment() throws {
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
    private func commit() throws {
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
