import ReelControl

/// What a request asks for, from its method and raw (still percent-encoded) path: a pure
/// function, so the table of who may reach what is tested without a server.
public enum WebRoute: Equatable, Sendable {
    case page
    case signinPage
    case signin
    case signout
    /// `/static/<file>`: a file of the Web directory (the raw, encoded name).
    case staticFile(String)
    case status
    case events
    case command(Command)
    case preview
    case recordings
    /// `/recordings/<name>` (the raw, encoded name).
    case recording(String)
    case notFound
    case methodNotAllowed

    /// The commands the page may send.
    static let commands: [String: Command] = ["start": .start, "pause": .pause, "resume": .resume, "undo": .undo, "stop": .stop]

    public static func match(method: String, path: String) -> WebRoute {
        let get = method == "GET" || method == "HEAD"
        let post = method == "POST"
        func only(_ ok: Bool, _ route: WebRoute) -> WebRoute { ok ? route : .methodNotAllowed }
        switch path {
        case "/", "/index.html": return only(get, .page)
        case "/signin": return get ? .signinPage : only(post, .signin)
        case "/signout": return only(post, .signout)
        case "/api/status": return only(get, .status)
        case "/api/events": return only(get, .events)
        case "/preview.mjpg": return only(get, .preview)
        case "/api/recordings": return only(get, .recordings)
        default: break
        }
        if path.hasPrefix("/api/"), let cmd = commands[String(path.dropFirst(5))] { return only(post, .command(cmd)) }
        if path.hasPrefix("/static/") { return only(get, .staticFile(String(path.dropFirst(8)))) }
        if path.hasPrefix("/recordings/") { return only(get, .recording(String(path.dropFirst(12)))) }
        return .notFound
    }

    /// Whether the route is open without a session: the sign-in page, its form and its own
    /// static files (`/static/signin.*`) only.
    public var isPublic: Bool {
        switch self {
        case .signinPage, .signin: return true
        case let .staticFile(name): return name.hasPrefix("signin.")
        default: return false
        }
    }

    /// The answer to a request without a session: the page sends the browser to /signin (303),
    /// everything else is 401.
    public var withoutSession: Int { self == .page ? 303 : 401 }
}
