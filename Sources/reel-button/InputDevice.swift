import CEvdev
import Glibc
import ReelCore
import ReelSystem

/// One open Linux input device, read through libevdev with the events stamped on CLOCK_MONOTONIC
/// (the clock of every instant in Reel). Names are the kernel's (libevdev's tables), none of ours.
final class InputDevice {
    let path: String
    let fd: Int32
    /// Unsafe pointer: libevdev's handle, owned by this object and freed in deinit.
    private let dev: OpaquePointer

    struct OpenError: Error, CustomStringConvertible {
        var description: String
        /// The device is absent (to wait for), not present but unusable.
        var absent: Bool
    }

    /// What reading produced.
    enum Reading {
        /// A key edge: `value` 1 pressed, 0 released (repeats are dropped); `at` the event's own time.
        case key(code: Int, pressed: Bool, at: Nanos)
        /// Nothing more to read now.
        case drained
        /// The device went away (unplugged) or failed.
        case gone(String)
    }

    init(path: String, writable: Bool) throws(OpenError) {
        self.path = path
        let fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            let absent = e == ENOENT || e == ENODEV || e == ENXIO
            let fix = e == EACCES ? " (run reel-button as root or as a member of the 'input' group)" : ""
            throw OpenError(description: "cannot open \(path): \(Errno.text(e))\(fix)", absent: absent)
        }
        var handle: OpaquePointer?
        let rc = libevdev_new_from_fd(fd, &handle)
        guard rc == 0, let handle else {
            Sys.close(fd)
            throw OpenError(description: "\(path) is not an input device libevdev can read: \(Errno.text(-rc)) (name an event device, e.g. /dev/input/by-id/...-event-kbd)",
                            absent: -rc == ENODEV)
        }
        self.fd = fd
        self.dev = handle
        // The events' own timestamps on CLOCK_MONOTONIC, comparable with reeld's.
        _ = libevdev_set_clock_id(dev, CLOCK_MONOTONIC)
    }

    deinit {
        libevdev_free(dev)
        Sys.close(fd)
    }

    /// The device's own name (`Pedal`, `AT Translated Set 2 keyboard`).
    var name: String { libevdev_get_name(dev).map { String(cString: $0) } ?? "?" }

    /// The code the kernel gives a key (`KEY_SPACE`, `BTN_0`) or LED (`LED_MISC`) name.
    static func code(ofKey name: String) -> Int? { code(UInt32(EV_KEY), name) }
    static func code(ofLED name: String) -> Int? { code(UInt32(EV_LED), name) }
    private static func code(_ type: UInt32, _ name: String) -> Int? {
        let c = libevdev_event_code_from_name(type, name)
        return c >= 0 ? Int(c) : nil
    }

    func hasKey(_ code: Int) -> Bool { libevdev_has_event_code(dev, UInt32(EV_KEY), UInt32(code)) == 1 }
    func hasLED(_ code: Int) -> Bool { libevdev_has_event_code(dev, UInt32(EV_LED), UInt32(code)) == 1 }

    /// The names of the keys, and of the LEDs, the device offers.
    var keyNames: [String] { names(UInt32(EV_KEY), max: Int(KEY_MAX)) }
    var ledNames: [String] { names(UInt32(EV_LED), max: Int(LED_MAX)) }

    private func names(_ type: UInt32, max: Int) -> [String] {
        (0...max).compactMap { c -> String? in
            guard libevdev_has_event_code(dev, type, UInt32(c)) == 1 else { return nil }
            return libevdev_event_code_get_name(type, UInt32(c)).map { String(cString: $0) } ?? "\(c)"
        }
    }

    static func keyName(_ code: Int) -> String {
        libevdev_event_code_get_name(UInt32(EV_KEY), UInt32(code)).map { String(cString: $0) } ?? "key \(code)"
    }

    /// The next key edge, if any is waiting. After a dropped-events report (SYN_DROPPED) libevdev's
    /// catch-up events are read the same way: a key whose state changed meanwhile is an edge then.
    func next() -> Reading {
        var ev = input_event()
        var flags = LIBEVDEV_READ_FLAG_NORMAL.rawValue
        while true {
            let rc = libevdev_next_event(dev, flags, &ev)
            if rc == -EAGAIN {
                if flags == LIBEVDEV_READ_FLAG_SYNC.rawValue { flags = LIBEVDEV_READ_FLAG_NORMAL.rawValue; continue }
                return .drained
            }
            if rc == Int32(LIBEVDEV_READ_STATUS_SYNC.rawValue) {
                if flags == LIBEVDEV_READ_FLAG_NORMAL.rawValue { flags = LIBEVDEV_READ_FLAG_SYNC.rawValue; continue }
            } else if rc < 0 {
                return .gone(-rc == ENODEV ? "\(path) was unplugged" : "reading \(path) failed: \(Errno.text(-rc))")
            }
            guard ev.type == UInt16(EV_KEY), ev.value == 0 || ev.value == 1 else { continue }
            let at = Nanos(ev.time.tv_sec) * nanosPerSecond + Nanos(ev.time.tv_usec) * 1000
            return .key(code: Int(ev.code), pressed: ev.value == 1, at: at)
        }
    }

    /// Lights or darkens the device's LED `code` (EV_LED written to the device).
    func setLED(_ code: Int, lit: Bool) -> String? {
        let rc = libevdev_kernel_set_led_value(dev, UInt32(code), lit ? LIBEVDEV_LED_ON : LIBEVDEV_LED_OFF)
        return rc == 0 ? nil : "cannot set the LED of \(path): \(Errno.text(-rc))"
    }
}
