import Foundation
import Glibc
import ReelButton
import ReelConfig
import ReelSystem

/// A Linux LED class device, `/sys/class/leds/NAME` (a GPIO LED from the `gpio-led` overlay):
/// lit at its `max_brightness`, dark at 0, written to `brightness`.
final class LEDClassLight {
    let path: String
    private let fd: Int32
    private let on: [UInt8]

    init(path: String) throws(ConfigError) {
        self.path = path
        let dir = path.hasSuffix("/") ? String(path.dropLast()) : path
        var max = "1"
        if let text = try? String(contentsOfFile: dir + "/max_brightness", encoding: .utf8),
           let n = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), n > 0 {
            max = String(n)
        }
        on = Array("\(max)\n".utf8)
        let fd = open(dir + "/brightness", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            let present = (try? FileManager.default.contentsOfDirectory(atPath: ButtonConfig.ledClassDirectory))?.sorted() ?? []
            let list = present.isEmpty ? "there is none" : "there are \(present.joined(separator: ", "))"
            let fix = e == EACCES ? "run reel-button as root, or give its user write access to \(dir)/brightness with a udev rule"
                : "name one of those, or add the LED, e.g. dtoverlay=gpio-led,gpio=17,label=tally in /boot/firmware/config.txt"
            throw ConfigError("cannot open the tally LED \(dir)/brightness: \(Errno.text(e)); \(list) (\(fix))")
        }
        self.fd = fd
    }

    deinit { Sys.close(fd) }

    /// Lights or darkens it; the error names the LED.
    func set(lit: Bool) -> String? {
        let bytes = lit ? on : Array("0\n".utf8)
        let rc = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return rc < 0 ? "cannot set the tally LED \(path): \(Errno.text(errno))" : nil
    }
}
