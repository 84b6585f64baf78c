import CV4L2
import Glibc
import ReelCore
import ReelSystem


/// One open V4L2 device through libv4l2: the only owner of its file descriptor and of its
/// mmap'ed streaming buffers; `close()` (or deinit) unmaps and closes them all, so the node can
/// come back after a disconnect (vivid recreates it only when the last fd is closed).
/// Not Sendable: used by one thread at a time (the opener, then the capture thread).
final class V4L2Device {
    let path: String
    private(set) var fd: Int32
    /// (start, length) of each mapped buffer. Unsafe pointers: mmap'ed driver memory, valid
    /// until `close()` unmaps it; read only between DQBUF and QBUF of that buffer.
    private(set) var buffers: [(UnsafeMutableRawPointer, Int)] = []
    private var streaming = false

    init(path: String) throws(CaptureError) {
        self.path = path
        let r = Sys.eintrSafe { creel_v4l2_open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) }
        let e = errno
        guard r >= 0 else {
            throw CaptureError("cannot open \(path): \(Errno.text(e)) (\(Errno.deviceOpenHint(e, kind: "camera")))")
        }
        fd = r
    }

    deinit { close() }

    /// Stops streaming, unmaps every buffer, closes the fd. Idempotent.
    func close() {
        guard fd >= 0 else { return }
        if streaming { _ = streamOff() }
        for (p, n) in buffers { _ = v4l2_munmap(p, n) }
        buffers = []
        _ = v4l2_close(fd)
        fd = -1
    }

    /// ioctl through libv4l2, retrying EINTR. Returns 0 or the errno, read right after the call.
    func ioctl<T>(_ request: UInt, _ arg: inout T) -> Int32 {
        // Unsafe pointer: `arg` is the struct the request number names, borrowed for the call only.
        let r = Sys.eintrSafe { withUnsafeMutablePointer(to: &arg) { creel_v4l2_ioctl(fd, request, UnsafeMutableRawPointer($0)) } }
        return r >= 0 ? 0 : errno
    }

    struct Capability { var driver: String; var card: String; var bus: String; var isCapture: Bool; var canStream: Bool }

    func queryCapability() throws(CaptureError) -> Capability {
        var cap = v4l2_capability()
        let e = ioctl(creel_vidioc_querycap(), &cap)
        guard e == 0 else { throw CaptureError("\(path) is not a V4L2 device (VIDIOC_QUERYCAP: \(Errno.text(e))); see 'reelctl devices'") }
        let caps = cap.capabilities & UInt32(V4L2_CAP_DEVICE_CAPS) != 0 ? cap.device_caps : cap.capabilities
        return Capability(driver: cString(cap.driver), card: cString(cap.card), bus: cString(cap.bus_info),
                          isCapture: caps & UInt32(V4L2_CAP_VIDEO_CAPTURE) != 0,
                          canStream: caps & UInt32(V4L2_CAP_STREAMING) != 0)
    }

    /// Every capture pixel format with its discrete sizes and frame rates
    /// (VIDIOC_ENUM_FMT, VIDIOC_ENUM_FRAMESIZES, VIDIOC_ENUM_FRAMEINTERVALS).
    func enumerateFormats() -> [CameraFormat] {
        var out: [CameraFormat] = []
        var i: UInt32 = 0
        while true {
            var fd = v4l2_fmtdesc()
            fd.index = i
            fd.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
            guard ioctl(creel_vidioc_enum_fmt(), &fd) == 0 else { break }
            i += 1
            var f = CameraFormat(fourcc: fd.pixelformat, description: cString(fd.description), sizes: [])
            var j: UInt32 = 0
            while true {
                var fs = v4l2_frmsizeenum()
                fs.index = j
                fs.pixel_format = fd.pixelformat
                guard ioctl(creel_vidioc_enum_framesizes(), &fs) == 0 else { break }
                j += 1
                if fs.type == V4L2_FRMSIZE_TYPE_DISCRETE.rawValue {
                    let (w, h) = (fs.discrete.width, fs.discrete.height)
                    f.sizes.append(CameraSize(width: Int(w), height: Int(h), rates: frameRates(fd.pixelformat, w, h)))
                } else {
                    let s = fs.stepwise
                    f.sizeRange = .init(minWidth: Int(s.min_width), maxWidth: Int(s.max_width), stepWidth: Int(s.step_width),
                                        minHeight: Int(s.min_height), maxHeight: Int(s.max_height), stepHeight: Int(s.step_height))
                    break
                }
            }
            out.append(f)
        }
        return out
    }

    private func frameRates(_ fourcc: UInt32, _ w: UInt32, _ h: UInt32) -> CameraRates {
        var rates: [Rational] = []
        var k: UInt32 = 0
        while true {
            var fi = v4l2_frmivalenum()
            fi.index = k
            fi.pixel_format = fourcc
            fi.width = w
            fi.height = h
            guard ioctl(creel_vidioc_enum_frameintervals(), &fi) == 0 else { break }
            k += 1
            if fi.type == V4L2_FRMIVAL_TYPE_DISCRETE.rawValue {
                let iv = fi.discrete  // an interval: rate = den/num
                if iv.numerator > 0, iv.denominator > 0 { rates.append(Rational(Int64(iv.denominator), Int64(iv.numerator))) }
            } else {
                let s = fi.stepwise  // longest interval = lowest rate
                guard s.min.numerator > 0, s.max.numerator > 0 else { break }
                return .range(min: Rational(Int64(s.max.denominator), Int64(s.max.numerator)),
                              max: Rational(Int64(s.min.denominator), Int64(s.min.numerator)))
            }
        }
        return .discrete(rates)
    }

    /// Sets the capture format; returns what the driver chose (width, height, fourcc, bytesperline, sizeimage).
    func setFormat(width: Int, height: Int, fourcc: UInt32) throws(CaptureError) -> v4l2_pix_format {
        var f = v4l2_format()
        f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        f.fmt.pix.width = UInt32(width)
        f.fmt.pix.height = UInt32(height)
        f.fmt.pix.pixelformat = fourcc
        f.fmt.pix.field = V4L2_FIELD_NONE.rawValue
        let e = ioctl(creel_vidioc_s_fmt(), &f)
        guard e == 0 else {
            throw CaptureError("cannot set format \(width)x\(height) \(fourCCString(fourcc)) on \(path): \(Errno.text(e)) (another program may be streaming from it)")
        }
        return f.fmt.pix
    }

    /// Sets the frame rate (if the driver allows) and reads it back with G_PARM; drivers clamp silently.
    func setFrameRate(_ fps: Rational) throws(CaptureError) -> Rational? {
        var p = v4l2_streamparm()
        p.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        if ioctl(creel_vidioc_g_parm(), &p) == 0, p.parm.capture.capability & UInt32(V4L2_CAP_TIMEPERFRAME) != 0 {
            p.parm.capture.timeperframe.numerator = UInt32(fps.den)
            p.parm.capture.timeperframe.denominator = UInt32(fps.num)
            let e = ioctl(creel_vidioc_s_parm(), &p)
            guard e == 0 else { throw CaptureError("cannot set \(fps) fps on \(path): \(Errno.text(e))") }
        }
        var g = v4l2_streamparm()
        g.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        guard ioctl(creel_vidioc_g_parm(), &g) == 0 else { return nil }
        let t = g.parm.capture.timeperframe
        guard t.numerator > 0, t.denominator > 0 else { return nil }
        return Rational(Int64(t.denominator), Int64(t.numerator))
    }

    /// Requests `count` mmap buffers, maps and queues them all. Returns how many the driver gave.
    func setUpBuffers(count: Int) throws(CaptureError) -> Int {
        var req = v4l2_requestbuffers()
        req.count = UInt32(count)
        req.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        req.memory = V4L2_MEMORY_MMAP.rawValue
        let e = ioctl(creel_vidioc_reqbufs(), &req)
        guard e == 0 else { throw CaptureError("cannot allocate streaming buffers on \(path): \(Errno.text(e)) (does the camera support mmap streaming?)") }
        guard req.count >= 2 else { throw CaptureError("\(path) gave only \(req.count) streaming buffers; Reel needs at least 2") }
        for i in 0..<req.count {
            var b = v4l2_buffer()
            b.index = i
            b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
            b.memory = V4L2_MEMORY_MMAP.rawValue
            let qe = ioctl(creel_vidioc_querybuf(), &b)
            guard qe == 0 else { throw CaptureError("cannot query streaming buffer \(i) of \(path): \(Errno.text(qe))") }
            let p = v4l2_mmap(nil, Int(b.length), PROT_READ | PROT_WRITE, MAP_SHARED, fd, Int64(b.m.offset))
            let me = errno
            guard let p, p != MAP_FAILED else { throw CaptureError("cannot map streaming buffer \(i) of \(path): \(Errno.text(me))") }
            buffers.append((p, Int(b.length)))
            try queue(index: i)
        }
        return Int(req.count)
    }

    func queue(index: UInt32) throws(CaptureError) {
        var b = v4l2_buffer()
        b.index = index
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        b.memory = V4L2_MEMORY_MMAP.rawValue
        let e = ioctl(creel_vidioc_qbuf(), &b)
        guard e == 0 else { throw CaptureError("\(path): cannot queue a capture buffer: \(Errno.text(e))") }
    }

    /// Dequeues a filled buffer into `b`: 0, or the errno (EAGAIN when none is ready).
    func dequeue(into b: inout v4l2_buffer) -> Int32 {
        b = v4l2_buffer()
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        b.memory = V4L2_MEMORY_MMAP.rawValue
        return ioctl(creel_vidioc_dqbuf(), &b)
    }

    func streamOn() throws(CaptureError) {
        var t = Int32(bitPattern: V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue)
        let e = ioctl(creel_vidioc_streamon(), &t)
        guard e == 0 else { throw CaptureError("cannot start streaming on \(path): \(Errno.text(e))") }
        streaming = true
    }

    func streamOff() -> Int32 {
        var t = Int32(bitPattern: V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue)
        streaming = false
        return ioctl(creel_vidioc_streamoff(), &t)
    }
}


/// The V4L2 video capture devices present: /dev/video* nodes that offer video capture.
func v4l2DeviceNodes() -> [String] {
    guard let d = opendir("/dev") else { return [] }
    defer { closedir(d) }
    var nodes: [(Int, String)] = []
    while let ent = readdir(d) {
        let name = cString(ent.pointee.d_name)
        if name.hasPrefix("video"), let n = Int(name.dropFirst(5)) { nodes.append((n, "/dev/\(name)")) }
    }
    return nodes.sorted { $0.0 < $1.0 }.map(\.1)
}
