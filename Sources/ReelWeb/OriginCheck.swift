/// The cross-site request check of every state-changing request (POST, PUT, PATCH, DELETE): its
/// `Origin` header (or, without one, the origin of its `Referer`) must be the page's own origin,
/// `scheme://Host` with the Host header the request names, or one given with `--origin`.
/// Browsers send `Origin` on every cross-origin POST and on same-origin ones too; a request with
/// neither header is refused (no browser sends a form or fetch POST without both).
public enum OriginCheck {
    public static func isStateChanging(_ method: String) -> Bool {
        ["POST", "PUT", "PATCH", "DELETE"].contains(method.uppercased())
    }

    /// Whether a request may go on. `scheme` is the page's own (http, or https behind a TLS
    /// proxy with --secure-cookie); `extra` the `--origin` values.
    public static func allows(method: String, origin: String?, referer: String?, host: String?,
                              scheme: String, extra: [String]) -> Bool {
        guard isStateChanging(method) else { return true }
        let claimed: String
        if let origin {
            claimed = origin
        } else if let referer, let fromReferer = Self.origin(ofURL: referer) {
            claimed = fromReferer
        } else {
            return false
        }
        guard let given = normalize(claimed) else { return false }
        var allowed: [String] = extra.compactMap(normalize)
        if let host, !host.isEmpty, let own = normalize("\(scheme)://\(host)") { allowed.append(own) }
        return allowed.contains(given)
    }

    /// `scheme://host[:port]` of an absolute http(s) URL; nil for anything else.
    public static func origin(ofURL url: String) -> String? {
        guard let sep = url.range(of: "://") else { return nil }
        let scheme = url[..<sep.lowerBound]
        let rest = url[sep.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.isEmpty else { return nil }
        return "\(scheme)://\(authority)"
    }

    /// Lowercased `scheme://host[:port]`, the scheme's default port dropped; nil when it is not an
    /// http(s) origin (`null`, userinfo, a path, an empty host).
    public static func normalize(_ origin: String) -> String? {
        let text = origin.lowercased()
        let scheme: String, defaultPort: String
        if text.hasPrefix("http://") { scheme = "http"; defaultPort = "80" }
        else if text.hasPrefix("https://") { scheme = "https"; defaultPort = "443" }
        else { return nil }
        var authority = String(text.dropFirst(scheme.count + 3))
        if authority.hasSuffix("/") { authority.removeLast() }
        guard !authority.isEmpty,
              !authority.contains(where: { "/?#@ \\\t\r\n".contains($0) }) else { return nil }
        if authority.hasSuffix(":" + defaultPort) { authority.removeLast(defaultPort.count + 1) }
        if authority.hasSuffix(":") || authority.hasPrefix(":") { return nil }
        return "\(scheme)://\(authority)"
    }
}
