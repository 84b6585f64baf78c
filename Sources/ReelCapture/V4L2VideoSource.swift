import CV4L2
import Glibc
import Logging
import ReelCore
import ReelMedia
import ReelSystem
import Synchronization

/// `--video /dev/videoN`: a V4L2 camera through libv4l2, mmap streaming, a poll-driven dequeue
/// loop on its own thread. Each dequeued buffer is copied (or MJPEG-decoded) into a pool slot
/// and requeued at once. Opening negotiates the exact format, size and rate or throws an error
/// listing what the camera offers; the frame rate is read back after setting it.
///
/// @unchecked Sendable: `device` and `decoder` are used by the initialiser, then only by the
/// capture thread (launched once by `start`), except the control ioctls `controls()` and
/// `setControls` make on the same fd from the control path under `deviceOpen` (V4L2 and libv4l2
/// allow an ioctl from another thread; the lock only keeps the fd from being closed under them);
/// the rest is immutable or guarded by CaptureThread.
public final class V4L2VideoSource: CaptureThread, CaptureSource, @unchecked Sendable {
    public let path: String
    public let request: CameraRequest
    /// What the pipeline receives: the camera's size, the rate read back, and the raw pixel
    /// format of the slots (I420 for MJPEG and yuv420).
    public let format: VideoFormat
    private let device: V4L2Device
    private let decoder: MJPEGDecoder?
    private let bytesPerLine: Int
    private let logger: Logger
    private let bufferCount: Int
    private let planes: [(rows: Int, src: Int, dst: Int)]
    /// True until the capture thread closes the device; held by the control path around its
    /// ioctls (briefly: never held by the capture loop itself).
    private let deviceOpen = Mutex(true)
    /// `/dev/video0 (vivid)`, for messages.
    public let camera: String

    /// `poolSlots` nil: about a second of frames (`FramePool.liveVideoSlots`), plus `extraSlots`
    /// (standby's pre-roll, `PreRoll.videoSlots`). `controls` are set once the format is (config then `reelctl set` overrides); one that is
    /// unknown, out of range or refused fails the open with an error naming it.
    public init(path: String, request: CameraRequest, logger: Logger, poolSlots: Int? = nil,
                controls: [CameraControlAssignment] = [], extraSlots: Int = 0) throws {
        let dev = try V4L2Device(path: path)
        let cap = try dev.queryCapability()
        guard cap.isCapture, cap.canStream else {
            throw CaptureError("\(path) (\(cap.card)) is not a video capture device with streaming I/O (metadata or output node?); see 'reelctl devices'")
        }
        let offer = dev.enumerateFormats()
        if case let .failure(e) = negotiateCamera(request, offer: offer, device: "\(path) (\(cap.card))") { throw e }
        let pix = try dev.setFormat(width: request.width, height: request.height, fourcc: request.pixelFormat.fourcc)
        guard Int(pix.width) == request.width, Int(pix.height) == request.height, pix.pixelformat == request.pixelFormat.fourcc else {
            throw CaptureError("\(path) (\(cap.card)) chose \(pix.width)x\(pix.height) \(fourCCString(pix.pixelformat)) instead of \(request.text); choose a listed mode (see 'reelctl devices')")
        }
        guard let actual = try dev.setFrameRate(request.fps) else {
            throw CaptureError("\(path) (\(cap.card)) does not report its frame rate (VIDIOC_G_PARM); Reel cannot time it")
        }
        guard actual == request.fps else {
            throw CaptureError("\(path) (\(cap.card)) runs \(request.width)x\(request.height) \(request.pixelFormat.rawValue) at \(actual) fps, not the requested \(request.fps) (the driver clamped it): use --fps \(actual) or a smaller --size")
        }
        let set = try dev.apply(controls, camera: "\(path) (\(cap.card))")
        if !set.isEmpty { logger.info("camera \(path): \(set.map { "\($0.name)=\($0.value.map($0.show) ?? "?")" }.joined(separator: " "))") }
        bufferCount = try dev.setUpBuffers(count: 6)
        device = dev
        camera = "\(path) (\(cap.card))"
        self.path = path
        self.request = request
        self.logger = logger
        format = VideoFormat(width: request.width, height: request.height, fps: actual, pixelFormat: request.pixelFormat.delivered)
        decoder = request.pixelFormat == .mjpeg ? try MJPEGDecoder(width: request.width, height: request.height) : nil
        let minLine = request.pixelFormat == .yuyv || request.pixelFormat == .uyvy ? request.width * 2 : request.width
        let bpl = max(Int(pix.bytesperline), minLine)
        bytesPerLine = bpl
        let (w, h) = (request.width, request.height)
        // Planes as (rows, source stride, packed row bytes): packed formats have one; NV12 a Y
        // plane and an interleaved UV plane of h/2 rows; YU12 a Y plane and two of h/2 rows of w/2.
        switch request.pixelFormat {
        case .yuyv, .uyvy: planes = [(h, bpl, w * 2)]
        case .nv12: planes = [(h, bpl, w), (h / 2, bpl, w)]
        case .yuv420, .mjpeg: planes = [(h, bpl, w), (h / 2, bpl / 2, w / 2), (h / 2, bpl / 2, w / 2)]
        }
        let bytes = format.pixelFormat.frameBytes(width: format.width, height: format.height)
        super.init(pool: FramePool(slots: (poolSlots ?? FramePool.liveVideoSlots(frameBytes: bytes, fps: actual)) + extraSlots, slotBytes: bytes),
                   name: "reel-video-v4l2")
        if bufferCount < 4 { logger.warning("\(path) gave only \(bufferCount) streaming buffers (asked for 6); frames may drop") }
    }

    public var description: String {
        "v4l2 \(path) \(format.width)x\(format.height) \(format.fps) \(request.pixelFormat.rawValue)"
    }

    public func start(at t0: Nanos, sink: any MediaSink) {
        launch { [self] in
            let failure = capture(sink: sink)
            deviceOpen.withLock { open in open = false; device.close() }  // every fd closed first, so a disconnected node can come back
            if let msg = failure {
                logger.error("\(msg)")
                // The one blocking delivery: a terminal event that must not be dropped.
                _ = sink.deliver(.sourceFailed(msg), wait: true)
            }
        }
    }

    /// The camera's controls, read on the open fd from the calling thread; nil once the capture
    /// thread has closed the device (the caller then opens it briefly itself).
    public func controls() -> [CameraControlInfo]? {
        deviceOpen.withLock { open in open ? device.queryControls() : nil }
    }

    /// Sets controls on the open fd while recording (see `V4L2Device.apply`); nil once closed.
    public func setControls(_ assignments: [CameraControlAssignment]) throws(CaptureError) -> [CameraControlInfo]? {
        let r: Result<[CameraControlInfo], CaptureError>? = deviceOpen.withLock { open in
            guard open else { return nil }
            do throws(CaptureError) { return .success(try device.apply(assignments, camera: camera)) } catch { return .failure(error) }
        }
        return try r?.get()
    }

    /// The capture loop; returns a failure message when the camera failed, nil when stopped.
    private func capture(sink: any MediaSink) -> String? {
        do { try device.streamOn() } catch { return "\(error)" }
        var last: UInt32?
        var warnedClock = false
        var buf = v4l2_buffer()
        var pfd = pollfd(fd: device.fd, events: Int16(POLLIN), revents: 0)
        let frameBytes = format.pixelFormat.frameBytes(width: format.width, height: format.height)
        var silentSince = SystemClock.now()
        var warnedSilent = false
        var captured: Int64 = 0, lostByCamera: Int64 = 0, errored: Int64 = 0, dropped: Int64 = 0
        var errorPolls = 0  // consecutive polls reporting an error with no frame to dequeue
        defer {
            logger.info("camera \(path): \(captured) frames dequeued, \(lostByCamera) lost by the camera (sequence gaps), \(errored) errored by the driver (V4L2_BUF_FLAG_ERROR, dropped), \(dropped) dropped here (pipeline behind or bad frame)")
        }
        while !isStopping {
            pfd.revents = 0
            let r = Sys.eintrSafe { poll(&pfd, 1, 100) }  // wakes at least every 100 ms to see `stop`
            if r < 0 { return "camera \(path) failed: poll: \(Errno.current)" }
            if r == 0 {
                if !warnedSilent, SystemClock.now() - silentSince > 5 * nanosPerSecond {
                    logger.warning("camera \(path) delivered no frame for 5 s (is it covered by another stream, or stalled?)")
                    warnedSilent = true
                }
                continue
            }
            // POLLERR/POLLHUP is a hint, not a verdict: DQBUF says what happened (ENODEV: gone,
            // EINVAL: not streaming, EIO: the driver's error state). Seen under emulation: one
            // POLLERR after the process was stopped for a while, with frames still coming.
            let errorHint = pfd.revents & Int16(POLLIN) == 0 && pfd.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0
            let e = device.dequeue(into: &buf)
            if e == EAGAIN {
                if errorHint {
                    errorPolls += 1
                    if errorPolls >= 50 {  // persistent, with nothing to dequeue: the stream is dead
                        return "camera \(path) failed: the device reports an error (POLLERR|POLLHUP) and delivers no frame: it was disconnected or stopped streaming (reconnect it; see 'reelctl devices')"
                    }
                    SystemClock.sleep(until: SystemClock.now() + 10_000_000)  // do not spin on a level-triggered error
                }
                continue
            }
            errorPolls = 0
            if e == EIO {
                return "camera \(path) failed: its driver stopped the stream with an error (VIDIOC_DQBUF: \(Errno.text(e))); start a new recording, and reconnect the camera if it happens again (see 'reelctl devices')"
            }
            if e != 0 {
                return "camera \(path) failed: VIDIOC_DQBUF: \(Errno.text(e)) (reconnect it; see 'reelctl devices')"
            }
            silentSince = SystemClock.now(); warnedSilent = false
            // Capture time: the driver's timestamp when it is on CLOCK_MONOTONIC, else dequeue time.
            let time: Nanos
            if buf.flags & UInt32(V4L2_BUF_FLAG_TIMESTAMP_MASK) == UInt32(V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC) {
                time = Nanos(buf.timestamp.tv_sec) * nanosPerSecond + Nanos(buf.timestamp.tv_usec) * 1000
            } else {
                if !warnedClock {
                    logger.warning("camera \(path) does not timestamp buffers on CLOCK_MONOTONIC; using the dequeue time (timing jitter possible)")
                    warnedClock = true
                }
                time = SystemClock.now()
            }
            captured += 1
            if let last {
                let gap = sequenceGap(previous: last, current: buf.sequence)
                if gap > 0 { countDrops(Int64(gap)); lostByCamera += Int64(gap) }
            }
            last = buf.sequence
            let index = buf.index
            // A buffer the driver marks V4L2_BUF_FLAG_ERROR (a transfer error: its data may be
            // corrupt) is requeued and dropped, never encoded; it leaves its slot of the frame grid
            // empty, like any drop, so the timing of the frames around it is untouched.
            if buf.flags & UInt32(V4L2_BUF_FLAG_ERROR) != 0 {
                if errored == 0 { logger.warning("camera \(path): the driver marked frame \(buf.sequence) as errored (V4L2_BUF_FLAG_ERROR); dropping it and any later errored frame (counted in droppedFrames)") }
                errored += 1
                requeue(index)
                countDrop()
                continue
            }
            let ok = Int(index) < device.buffers.count
            if ok, let slot = pool.tryAcquire() {
                let (p, len) = device.buffers[Int(index)]
                let used = min(Int(buf.bytesused), len)
                // Safe: p maps `len` bytes of buffer `index`, dequeued so the driver is not writing it.
                if fill(slot: slot, from: UnsafeRawBufferPointer(start: p, count: used), frameBytes: frameBytes) {
                    requeue(index)
                    if !sink.deliver(.video(slot: slot, time: time), wait: false) { pool.release(slot); countDrop(); dropped += 1 }
                } else {
                    requeue(index)
                    pool.release(slot); countDrop(); dropped += 1
                }
            } else {
                requeue(index)
                countDrop(); dropped += 1  // a bad buffer index, or the pipeline holds every slot
            }
        }
        _ = device.streamOff()
        return nil
    }

    private func requeue(_ index: UInt32) {
        do { try device.queue(index: index) } catch { logger.warning("\(error)") }
    }

    private var warnedShort = false
    /// Copies one frame into `slot` tightly packed (or decodes MJPEG into it). False: bad frame.
    private func fill(slot: Int, from src: UnsafeRawBufferPointer, frameBytes: Int) -> Bool {
        let dst = pool.buffer(slot)
        if let decoder {
            do { try decoder.decode(src, into: dst); return true } catch {
                if !warnedShort { logger.warning("camera \(path): dropping a bad MJPEG frame: \(error)"); warnedShort = true }
                return false
            }
        }
        if bytesPerLine == planes[0].dst {
            guard src.count >= frameBytes else {
                if !warnedShort { logger.warning("camera \(path): dropping a short frame (\(src.count) of \(frameBytes) bytes)"); warnedShort = true }
                return false
            }
            dst.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[0..<frameBytes]))
            return true
        }
        var so = 0, d = 0
        for plane in planes {
            for _ in 0..<plane.rows {
                guard so + plane.dst <= src.count else { return false }
                // Safe: bounds checked against src.count here and dst holds frameBytes.
                (dst.baseAddress! + d).copyMemory(from: src.baseAddress! + so, byteCount: plane.dst)
                so += plane.src; d += plane.dst
            }
        }
        return true
    }
}
