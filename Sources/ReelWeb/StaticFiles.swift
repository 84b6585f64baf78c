import Foundation
import Glibc
import ReelSystem

/// The page's files (index.html, signin.html, app.js, app.css, ...): the `Web` directory that
/// ships with reel-web. Found at `--web-root`, else PREFIX/share/reel/web beside the installed
/// binary (`make install`), else SwiftPM's resource copy beside a built one
/// (`.build/release/reel_ReelWeb.resources/Web`). Files are read at each request (they are small),
/// by plain names only, with O_NOFOLLOW.
public struct StaticFiles: Sendable {
    public let root: String

    public init(root: String) { self.root = root }

    /// Where the Web directory is for the binary at `executable` (nil: none found).
    public static func locate(explicit: String?, executable: String) -> String? {
        if let explicit { return explicit }
        let bin = (executable as NSString).deletingLastPathComponent
        let candidates = [
            ((bin as NSString).deletingLastPathComponent as NSString).appendingPathComponent("share/reel/web"),
            (bin as NSString).appendingPathComponent("reel_ReelWeb.resources/Web"),
        ]
        return candidates.first { FileManager.default.fileExists(atPath: ($0 as NSString).appendingPathComponent("index.html")) }
    }

    /// The bytes and content type of file `name` (decoded), nil when there is no such plain file.
    public func read(_ name: String) -> (bytes: [UInt8], type: String)? {
        guard RecordingsDirectory.isPlainName(name), let type = Self.contentType(name) else { return nil }
        let fd = Sys.eintrSafe { open("\(root)/\(name)", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) }
        guard fd >= 0 else { return nil }
        defer { Sys.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size <= 16 << 20 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var got = 0
        while got < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, $0.count - got, off_t(got)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            got += n
        }
        return (bytes, type)
    }

    /// The types the page uses; other files are not served.
    public static func contentType(_ name: String) -> String? {
        let ext = (name as NSString).pathExtension.lowercased()
        return [
            "html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
            "svg": "image/svg+xml", "png": "image/png", "ico": "image/x-icon", "json": "application/json",
            "webmanifest": "application/manifest+json", "woff2": "font/woff2",
        ][ext]
    }
}
