import Glibc

/// errno as short lower-case text for device errors.
package func deviceErrorText(_ code: Int32) -> String {
    switch code {
    case ENOENT: return "no such file or device"
    case ENODEV: return "no such device (unplugged or disconnected)"
    case EACCES: return "permission denied"
    case EBUSY: return "device busy"
    case EIO: return "input/output error"
    default: return String(cString: strerror(code)).lowercased()
    }
}

/// A fix hint for an errno from opening a device.
package func deviceOpenHint(_ code: Int32, kind: String) -> String {
    switch code {
    case ENOENT, ENODEV, ENXIO: return "is the \(kind) plugged in? see 'reelctl devices'"
    case EACCES, EPERM: return "add the user running reeld to the '\(kind == "camera" ? "video" : "audio")' group"
    case EBUSY: return "another program is using the \(kind); close it or choose another device"
    default: return "see 'reelctl devices'"
    }
}

/// A fixed-size C char array (imported as a tuple) as a String, up to its first NUL.
package func cString<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { raw in
        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
}
