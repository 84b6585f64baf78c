import CCrypt
import Foundation
import Glibc

/// The sign-in password as /etc/shadow keeps one: a yescrypt hash (`$y$...`) made and checked by
/// the system's libcrypt (libxcrypt). `reel-web hash-password` prints one for `--password-file`.
public enum Password {
    /// What can go wrong making or reading a hash, naming the thing and the fix.
    public struct Failure: Error, CustomStringConvertible, Equatable {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// The longest password accepted (bytes): yescrypt takes any length, but a sign-in form has no use for more.
    public static let maxBytes = 1024

    /// A new yescrypt hash of `password` with a fresh random salt (getrandom(2), through the
    /// standard library's SystemRandomNumberGenerator), at libcrypt's default cost.
    public static func hash(_ password: String) throws -> String {
        try check(password)
        var generator = SystemRandomNumberGenerator()
        let salt = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        var setting = [CChar](repeating: 0, count: Int(CRYPT_GENSALT_OUTPUT_SIZE))
        let made = salt.withUnsafeBufferPointer { bytes in
            crypt_gensalt_rn("$y$", 0, bytes.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) },
                             Int32(bytes.count), &setting, Int32(setting.count))
        }
        guard made != nil else {
            throw Failure("libcrypt cannot make a yescrypt salt (crypt_gensalt_rn: \(String(cString: strerror(errno)))): is libcrypt1 at least 4.4 (libxcrypt)?")
        }
        let hashed = cryptHash(password, setting: String(decoding: setting.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        guard let hashed, hashed.hasPrefix("$y$") else {
            throw Failure("libcrypt cannot compute a yescrypt hash: is libcrypt1 at least 4.4 (libxcrypt)?")
        }
        return hashed
    }

    /// Whether `password` hashes to `stored` (a line of the password file). The two hashes are
    /// compared in constant time; a malformed `stored` never matches.
    public static func verify(_ password: String, against stored: String) -> Bool {
        guard password.utf8.count <= maxBytes, stored.hasPrefix("$") else { return false }
        guard let computed = cryptHash(password, setting: stored) else { return false }
        return constantTimeEqual(Array(computed.utf8), Array(stored.utf8))
    }

    /// Equal bytes, in a time that depends on the lengths only.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var diff = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for i in 0..<max(a.count, b.count) {
            diff |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0)
        }
        return diff == 0
    }

    /// Refuses what cannot be a password: empty, too long, or holding a NUL or a newline.
    public static func check(_ password: String) throws {
        if password.isEmpty { throw Failure("the password is empty: type one (reel-web hash-password reads it from stdin)") }
        if password.utf8.count > maxBytes { throw Failure("the password is longer than \(maxBytes) bytes: choose a shorter one") }
        if password.utf8.contains(where: { $0 == 0 || $0 == 10 || $0 == 13 }) {
            throw Failure("the password holds a NUL or a line break: choose one without")
        }
    }

    /// The hash a password file holds: its first line, which must be a yescrypt or another crypt(5) hash.
    public static func parseFile(_ text: String, path: String) throws -> String {
        let line = text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).first.map(String.init)?
            .trimmingCharacters(in: .whitespaces) ?? ""
        guard line.hasPrefix("$"), line.count >= 8, !line.contains(":") else {
            throw Failure("\(path) does not hold a password hash: write one with 'reel-web hash-password > \(path)'")
        }
        return line
    }

    /// crypt_r(3) on a heap `struct crypt_data` (about 32 KiB, too big for a thread's stack to spare).
    /// nil when libcrypt refuses (an unknown or malformed setting: libxcrypt then returns a string beginning with '*').
    private static func cryptHash(_ password: String, setting: String) -> String? {
        // Unsafe pointer: crypt_r's work area, allocated, zeroed and freed here.
        let data = UnsafeMutablePointer<crypt_data>.allocate(capacity: 1)
        defer {
            memset(data, 0, MemoryLayout<crypt_data>.size)  // the password's traces
            data.deallocate()
        }
        memset(data, 0, MemoryLayout<crypt_data>.size)
        guard let out = crypt_r(password, setting, data) else { return nil }
        let text = String(cString: out)
        return text.hasPrefix("*") ? nil : text
    }
}
