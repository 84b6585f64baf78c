import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ReelControl
import ReelCore
import ReelSystem
import Synchronization

/// What `reel-web` was started with.
public struct WebSettings: Sendable {
    public var socketPath: String
    public var recordingsDir: String
    public var webRoot: String
    /// The password file's hash; nil with `--no-auth` (every route open).
    public var passwordHash: String?
    public var secureCookie: Bool
    public var extraOrigins: [String]
    /// reeld's outbox_dir (`--outbox-dir`): a recording waiting there (two names) is served too.
    public var outboxDir: String?

    public init(socketPath: String, recordingsDir: String, webRoot: String, passwordHash: String?,
                secureCookie: Bool, extraOrigins: [String], outboxDir: String? = nil) {
        self.outboxDir = outboxDir
        self.socketPath = socketPath
        self.recordingsDir = recordingsDir
        self.webRoot = webRoot
        self.passwordHash = passwordHash
        self.secureCookie = secureCookie
        self.extraOrigins = extraOrigins
    }
}

/// reel-web's HTTP side: every request goes through `respond`, which routes it (`WebRoute`),
/// checks its origin (`OriginCheck`) and session (`SessionStore`), then hands it to its handler
/// (WebApp+Handlers.swift, the long-lived responses in WebApp+Streams.swift).
public final class WebApp: Sendable {
    public static let cookieName = "reel_session"

    let settings: WebSettings
    let logger: Logger
    let pool: BlockingPool
    let link: ReeldLink
    let events: EventHub
    let previews: PreviewHub
    let files: StaticFiles
    let recordings: RecordingsDirectory
    let sessions = Mutex(SessionStore())
    let throttle = Mutex(SignInThrottle())

    public init(settings: WebSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
        pool = BlockingPool(name: "web-io", threads: 4)
        link = ReeldLink(socketPath: settings.socketPath, pool: pool)
        events = EventHub(socketPath: settings.socketPath, logger: logger)
        previews = PreviewHub(socketPath: settings.socketPath, logger: logger)
        files = StaticFiles(root: settings.webRoot)
        recordings = RecordingsDirectory(path: settings.recordingsDir, outbox: settings.outboxDir)
    }

    var authRequired: Bool { settings.passwordHash != nil }

    public func respond(to request: WebRequest, context: WebContext) async throws -> Response {
        let method = request.method.rawValue
        let route = WebRoute.match(method: method, path: request.uri.path)
        let scheme = settings.secureCookie ? "https" : "http"
        guard OriginCheck.allows(method: method, origin: request.headers[.origin], referer: request.headers[.referer],
                                 host: request.head.authority, scheme: scheme,
                                 extra: settings.extraOrigins) else {
            logger.notice("refused a cross-origin \(method) \(request.uri.path) from \(context.clientAddress) (Origin: \(request.headers[.origin] ?? "none"))")
            return Self.json(403, #"{"ok":false,"error":{"code":"forbidden","message":"cross-origin request refused: reel-web takes state-changing requests from its own page only (or an origin given with --origin)"}}"#)
        }
        if !route.isPublic, authRequired, session(of: request) == nil {
            return route.withoutSession == 303
                ? Self.redirect("/signin")
                : Self.json(401, #"{"ok":false,"error":{"code":"forbidden","message":"sign in first (POST /signin)"}}"#)
        }
        var request = request
        switch route {
        case .page: return page("index.html")
        case .signinPage: return authRequired ? page("signin.html") : Self.redirect("/")
        case .signin: return try await signIn(&request, context: context)
        case .signout: return signOut(request)
        case let .staticFile(raw): return staticFile(raw)
        case .status: return await status()
        case .events: return eventStream()
        case let .command(cmd): return try await command(cmd, &request)
        case .preview: return preview(request)
        case .recordings: return await recordingList()
        case let .recording(raw): return await recording(raw, request)
        case .notFound: return Self.json(404, #"{"ok":false,"error":{"code":"not_found","message":"no such page"}}"#)
        case .methodNotAllowed: return Self.json(405, #"{"ok":false,"error":{"code":"bad_request","message":"method not allowed here"}}"#)
        }
    }

    /// The live session token the request's cookie carries, if any.
    func session(of request: WebRequest) -> String? {
        guard let token = request.cookies[Self.cookieName]?.value else { return nil }
        let now = SystemClock.now()
        return sessions.withLock { $0.touch(token, now: now) } ? token : nil
    }

    // MARK: Responses

    /// Headers every response carries: no sniffing, no framing, no referrer to elsewhere.
    static func baseHeaders(_ contentType: String, cache: String = "no-store") -> HTTPFields {
        var h = HTTPFields()
        h[.contentType] = contentType
        h[.cacheControl] = cache
        h[.xContentTypeOptions] = "nosniff"
        h[HTTPField.Name("X-Frame-Options")!] = "DENY"
        h[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        return h
    }

    static func json(_ status: Int, _ body: String) -> Response {
        json(status, Array(body.utf8))
    }

    static func json(_ status: Int, _ body: [UInt8]) -> Response {
        var h = baseHeaders("application/json")
        h[.contentLength] = String(body.count)
        return Response(status: .init(code: status), headers: h, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func redirect(_ location: String, cookie: String? = nil) -> Response {
        var h = baseHeaders("text/plain; charset=utf-8")
        h[.location] = location
        if let cookie { h[.setCookie] = cookie }
        h[.contentLength] = "0"
        return Response(status: .seeOther, headers: h)
    }

    /// The page's files: the content security policy keeps scripts and styles to the page's own
    /// files (no inline script, nothing from elsewhere).
    static let contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    func page(_ name: String) -> Response {
        guard let file = files.read(name) else {
            logger.error("the page file \(settings.webRoot)/\(name) is missing: reinstall reel-web or give --web-root")
            return Self.json(500, #"{"ok":false,"error":{"code":"failed","message":"the page's files are missing on the server (see its log)"}}"#)
        }
        return fileResponse(file.bytes, type: file.type)
    }

    func fileResponse(_ bytes: [UInt8], type: String) -> Response {
        var h = Self.baseHeaders(type, cache: "no-cache")
        if type.hasPrefix("text/html") { h[.contentSecurityPolicy] = Self.contentSecurityPolicy }
        h[.contentLength] = String(bytes.count)
        return Response(status: .ok, headers: h, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    func staticFile(_ raw: String) -> Response {
        guard let name = raw.removingPercentEncoding, let file = files.read(name) else {
            return Self.json(404, #"{"ok":false,"error":{"code":"not_found","message":"no such file"}}"#)
        }
        return fileResponse(file.bytes, type: file.type)
    }
}
