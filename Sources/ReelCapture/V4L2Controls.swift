import CV4L2
import Glibc
import ReelCore
import ReelSystem

/// A camera's V4L2 controls: listing (VIDIOC_QUERY_EXT_CTRL, VIDIOC_QUERYMENU, VIDIOC_G_EXT_CTRLS)
/// and setting (VIDIOC_S_EXT_CTRLS, all in one call). What a user wrote is checked in ReelCore's
/// `CameraControls.resolve` against the control's description before any ioctl; what the driver
/// then refuses is reported with its errno, naming the control.
extension V4L2Device {
    /// Every control but class headings and disabled ones, in the driver's order. Compound
    /// controls other than strings (arrays, areas, codec parameters) are left out: nothing to
    /// set from a config file.
    func queryControls() -> [CameraControlInfo] {
        var out: [CameraControlInfo] = []
        let next = UInt32(V4L2_CTRL_FLAG_NEXT_CTRL) | UInt32(V4L2_CTRL_FLAG_NEXT_COMPOUND)
        var q = v4l2_query_ext_ctrl()
        q.id = next
        var first = true
        while true {
            let e = ioctl(creel_vidioc_query_ext_ctrl(), &q)
            if e == ENOTTY, first { return queryControlsLegacy() }
            guard e == 0 else { break }  // EINVAL: no more controls
            first = false
            let id = q.id
            defer { q = v4l2_query_ext_ctrl(); q.id = id | next }
            guard q.flags & UInt32(V4L2_CTRL_FLAG_DISABLED) == 0, q.nr_of_dims == 0,
                  let type = Self.controlType(q.type) else { continue }
            out.append(describe(id: id, label: cString(q.name), type: type, min: q.minimum, max: q.maximum,
                                step: Int64(bitPattern: q.step), defaultValue: q.default_value, flags: q.flags))
        }
        return out
    }

    /// Drivers without VIDIOC_QUERY_EXT_CTRL (ENOTTY): the older VIDIOC_QUERYCTRL, 32-bit ranges.
    private func queryControlsLegacy() -> [CameraControlInfo] {
        var out: [CameraControlInfo] = []
        var q = v4l2_queryctrl()
        q.id = UInt32(V4L2_CTRL_FLAG_NEXT_CTRL)
        while ioctl(creel_vidioc_queryctrl(), &q) == 0 {
            let id = q.id
            defer { q = v4l2_queryctrl(); q.id = id | UInt32(V4L2_CTRL_FLAG_NEXT_CTRL) }
            guard q.flags & UInt32(V4L2_CTRL_FLAG_DISABLED) == 0, let type = Self.controlType(q.type) else { continue }
            out.append(describe(id: id, label: cString(q.name), type: type, min: Int64(q.minimum), max: Int64(q.maximum),
                                step: Int64(q.step), defaultValue: Int64(q.default_value), flags: q.flags))
        }
        return out
    }

    private static func controlType(_ t: UInt32) -> CameraControlType? {
        switch t {
        case V4L2_CTRL_TYPE_INTEGER.rawValue: return .int
        case V4L2_CTRL_TYPE_INTEGER64.rawValue: return .int64
        case V4L2_CTRL_TYPE_BOOLEAN.rawValue: return .bool
        case V4L2_CTRL_TYPE_MENU.rawValue: return .menu
        case V4L2_CTRL_TYPE_INTEGER_MENU.rawValue: return .intmenu
        case V4L2_CTRL_TYPE_BUTTON.rawValue: return .button
        case V4L2_CTRL_TYPE_BITMASK.rawValue: return .bitmask
        case V4L2_CTRL_TYPE_STRING.rawValue: return .string
        default: return nil  // V4L2_CTRL_TYPE_CTRL_CLASS (a heading) and compound types
        }
    }

    private func describe(id: UInt32, label: String, type: CameraControlType, min: Int64, max: Int64, step: Int64,
                          defaultValue: Int64, flags: UInt32) -> CameraControlInfo {
        var names: [String] = []
        for (bit, name) in [(V4L2_CTRL_FLAG_READ_ONLY, "read-only"), (V4L2_CTRL_FLAG_WRITE_ONLY, "write-only"),
                            (V4L2_CTRL_FLAG_INACTIVE, "inactive"), (V4L2_CTRL_FLAG_GRABBED, "grabbed"),
                            (V4L2_CTRL_FLAG_VOLATILE, "volatile"), (V4L2_CTRL_FLAG_SLIDER, "slider")]
        where flags & UInt32(bit) != 0 { names.append(name) }
        var info = CameraControlInfo(name: CameraControls.name(label), label: label, id: id, type: type, min: min, max: max,
                                     step: step, defaultValue: defaultValue, value: nil, flags: names)
        if type == .menu || type == .intmenu, min >= 0, max >= min, max - min < 1024 {
            for index in min...max {
                var m = v4l2_querymenu()
                m.id = id
                m.index = UInt32(index)
                guard ioctl(creel_vidioc_querymenu(), &m) == 0 else { continue }  // an index the driver skips
                info.menu.append(CameraControlMenuEntry(index: index, name: type == .menu ? cString(m.name) : "\(m.value)"))
            }
        }
        if type != .button, flags & UInt32(V4L2_CTRL_FLAG_WRITE_ONLY) == 0 {
            if type == .string { info.text = readText(id: id, maxLength: max) } else { info.value = try? read(id: id, type: type).get() }
        }
        return info
    }

    /// A string control's text (VIDIOC_G_EXT_CTRLS with a buffer of max + 1 bytes), or nil.
    private func readText(id: UInt32, maxLength: Int64) -> String? {
        guard maxLength >= 0, maxLength < 65536 else { return nil }
        var buf = [CChar](repeating: 0, count: Int(maxLength) + 1)
        var cs = v4l2_ext_controls()
        cs.which = UInt32(V4L2_CTRL_WHICH_CUR_VAL)
        cs.count = 1
        // Unsafe pointers: `buf` and `c` outlive the one call that writes through them.
        let e = buf.withUnsafeMutableBufferPointer { b -> Int32 in
            var c = v4l2_ext_control()
            c.id = id
            c.size = UInt32(b.count)
            c.string = b.baseAddress
            return withUnsafeMutablePointer(to: &c) { p -> Int32 in
                cs.controls = p
                return ioctl(creel_vidioc_g_ext_ctrls(), &cs)
            }
        }
        guard e == 0 else { return nil }
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// One control's current value (VIDIOC_G_EXT_CTRLS), or the errno. A bitmask is a u32 (as
    /// its max and default are given), not a negative number when its top bit is set.
    func read(id: UInt32, type: CameraControlType) -> Result<Int64, SystemError> {
        var c = v4l2_ext_control()
        c.id = id
        var cs = v4l2_ext_controls()
        cs.which = UInt32(V4L2_CTRL_WHICH_CUR_VAL)
        cs.count = 1
        // Unsafe pointer: `c` outlives the call that reads through it.
        let e = withUnsafeMutablePointer(to: &c) { p -> Int32 in
            cs.controls = p
            return ioctl(creel_vidioc_g_ext_ctrls(), &cs)
        }
        guard e == 0 else { return .failure(SystemError(call: "VIDIOC_G_EXT_CTRLS", errno: e)) }
        switch type {
        case .int64: return .success(c.value64)
        case .bitmask: return .success(Int64(UInt32(bitPattern: c.value)))
        default: return .success(Int64(c.value))
        }
    }

    /// Sets `assignments` in one VIDIOC_S_EXT_CTRLS (later ones win over earlier ones of the same
    /// name, so config then `reelctl set` overrides), after checking every one against the
    /// camera's own description; nothing is set when any is unknown or out of range. `camera`
    /// names the device in messages. Returns the controls as read back afterwards.
    func apply(_ assignments: [CameraControlAssignment], camera: String) throws(CaptureError) -> [CameraControlInfo] {
        guard !assignments.isEmpty else { return [] }
        let controls = queryControls()
        var chosen: [(info: CameraControlInfo, value: Int64, a: CameraControlAssignment)] = []
        for a in assignments {
            let info: CameraControlInfo
            switch CameraControls.find(a.name, in: controls, camera: camera) {
            case let .success(c): info = c
            case let .failure(e): throw CaptureError(Self.at(a) + e.message)
            }
            switch CameraControls.resolve(a.input, for: info, camera: camera) {
            case let .success(v):
                chosen.removeAll { $0.info.id == info.id }
                chosen.append((info, v, a))
            case let .failure(e): throw CaptureError(Self.at(a) + e.message)
            }
        }
        var list = chosen.map { item -> v4l2_ext_control in
            var c = v4l2_ext_control()
            c.id = item.info.id
            if item.info.type == .int64 { c.value64 = item.value } else { c.value = Int32(truncatingIfNeeded: item.value) }
            return c
        }
        let (e, index) = setAll(&list, request: creel_vidioc_s_ext_ctrls())
        if e != 0 {
            // error_idx == count: the driver refused while validating, before setting any; find
            // which one by trying each alone (VIDIOC_TRY_EXT_CTRLS changes nothing). A try does
            // not check what only a set does, a grabbed control (EBUSY): then the grabbed one;
            // and a control set alone is the one refused.
            var culprit = index < chosen.count ? index : nil
            if culprit == nil {
                culprit = chosen.indices.first { i in
                    var one = [list[i]]
                    return setAll(&one, request: creel_vidioc_try_ext_ctrls()).0 != 0
                } ?? (e == EBUSY ? chosen.indices.first { chosen[$0].info.isGrabbed } : nil)
                    ?? (chosen.count == 1 ? 0 : nil)
            }
            let who = culprit.map { chosen[$0] }
            let what = who.map { "\(Self.at($0.a))cannot set \($0.info.name)=\($0.a.input)" }
                ?? "cannot set \(chosen.map { "\($0.info.name)=\($0.a.input)" }.joined(separator: " "))"
            let applied = index < chosen.count && index > 0 ? "the \(index) before it may have been set" : "none was set"
            // What the control takes, when the driver refused the value (not when it was busy or locked).
            let takes = e == ERANGE || e == EINVAL ? who.map { "; \($0.info.name) takes \($0.info.rangeText)" } ?? "" : ""
            throw CaptureError("\(what) on camera \(camera): the driver refused it (VIDIOC_S_EXT_CTRLS: \(Errno.text(e))); \(applied)\(takes)\(Self.refusalHint(e, who?.info))")
        }
        let after = queryControls()
        return chosen.compactMap { c in after.first { $0.id == c.info.id } }
    }

    /// `FILE:LINE: ` before a message about a value from the config file; "" for `reelctl set`.
    private static func at(_ a: CameraControlAssignment) -> String { a.origin.isEmpty ? "" : "\(a.origin): " }

    private static func refusalHint(_ e: Int32, _ info: CameraControlInfo?) -> String {
        switch e {
        case EBUSY: return info?.isGrabbed == true
            // With standby the camera streams while idle too: the config is applied at the open, before it streams.
            ? " (the camera locks it while it streams: put it in [camera.controls] of reeld's config, which is applied when the camera opens, before it streams; without standby a 'reelctl set' while idle works too)"
            : " (another program holds it, or the camera locks it while it streams)"
        case EACCES: return info?.isInactive == true
            ? " (it is inactive: an automatic mode decides it now; turn that off first, e.g. in the same 'reelctl set')"
            : " (the driver does not allow writing it now)"
        case ERANGE, EINVAL: return " (see 'reelctl controls' for what it takes)"
        default: return ""
        }
    }

    /// VIDIOC_S_EXT_CTRLS or VIDIOC_TRY_EXT_CTRLS of `list`: the errno (0) and error_idx.
    private func setAll(_ list: inout [v4l2_ext_control], request: UInt) -> (Int32, Int) {
        var cs = v4l2_ext_controls()
        cs.which = UInt32(V4L2_CTRL_WHICH_CUR_VAL)
        cs.count = UInt32(list.count)
        // Unsafe pointer: `list`'s storage, borrowed for this one call.
        let e = list.withUnsafeMutableBufferPointer { buf -> Int32 in
            cs.controls = buf.baseAddress
            return ioctl(request, &cs)
        }
        return (e, Int(cs.error_idx))
    }
}

/// `reelctl controls` and `set` while no recording holds the camera: reeld opens the device
/// briefly (never while another of its own fds streams from it), applies `base` (the config,
/// then earlier `reelctl set`s) and then `assignments`, and closes it.
public enum CameraControlAccess {
    /// The controls of the camera at `path` after applying `base` (its errors are the next
    /// `start`'s to report, so they do not stop the listing); `warning` says what was not applied.
    public static func list(path: String, base: [CameraControlAssignment]) throws(CaptureError) -> (controls: [CameraControlInfo], warning: String?) {
        let (dev, camera) = try open(path)
        defer { dev.close() }
        var warning: String?
        do { _ = try dev.apply(base, camera: camera) } catch { warning = error.description }
        return (dev.queryControls(), warning)
    }

    /// Applies `base` (best effort, as at `list`), then `assignments` (which must all succeed);
    /// returns those controls as read back.
    public static func set(path: String, base: [CameraControlAssignment], _ assignments: [CameraControlAssignment]) throws(CaptureError) -> [CameraControlInfo] {
        let (dev, camera) = try open(path)
        defer { dev.close() }
        _ = try? dev.apply(base, camera: camera)
        return try dev.apply(assignments, camera: camera)
    }

    /// Who the camera at `path` is: driver, card and bus as QUERYCAP says (a brief open, also
    /// while another fd streams from it); nil when it cannot be opened or asked.
    public static func identity(path: String) -> String? {
        guard let dev = try? V4L2Device(path: path) else { return nil }
        defer { dev.close() }
        guard let cap = try? dev.queryCapability() else { return nil }
        return "\(cap.driver) '\(cap.card)' at \(cap.bus)"
    }

    private static func open(_ path: String) throws(CaptureError) -> (V4L2Device, String) {
        let dev = try V4L2Device(path: path)
        let cap = try dev.queryCapability()
        return (dev, "\(path) (\(cap.card))")
    }
}
