import Foundation
import Hummingbird
import NIOCore
import ReelControl
import ReelCore
import ReelSystem

/// The short requests: sign-in and out, status, the commands, the recordings list.
extension WebApp {
    /// The longest body a request may carry (the sign-in form, a command's JSON).
    static let maxBodyBytes = 16 * 1024

    /// POST /signin: the throttle first (an address that has just failed waits its turn), then
    /// the password, checked on the blocking pool (yescrypt is slow on purpose).
    func signIn(_ request: inout WebRequest, context: WebContext) async throws -> Response {
        guard let hash = settings.passwordHash else { return Self.redirect("/") }
        let body = try await request.collectBody(upTo: Self.maxBodyBytes)
        let password = FormBody.field("password", in: String(buffer: body)) ?? ""
        let client = context.clientAddress
        let admitAt = throttle.withLock { $0.admit(client: client, now: SystemClock.now()) }
        try await Self.sleep(until: admitAt)
        let right = (try? await pool.run { Password.verify(password, against: hash) }) ?? false
        if right {
            throttle.withLock { $0.succeeded(client: client, now: SystemClock.now()) }
            let token = SessionStore.newToken()
            sessions.withLock { $0.open(token, now: SystemClock.now()) }
            logger.info("signed in from \(client)")
            return Self.redirect("/", cookie: sessionCookie(token))
        }
        let wait = throttle.withLock { $0.failed(client: client, now: SystemClock.now()) }
        logger.notice("wrong password from \(client); answered after \(wait / 1_000_000) ms")
        try await Self.sleep(until: SystemClock.now() + wait)
        let message = "wrong password"
        if request.headers[.accept]?.contains("application/json") == true {
            return Self.json(401, #"{"ok":false,"error":{"code":"forbidden","message":"\#(message)"}}"#)
        }
        var h = Self.baseHeaders("text/html; charset=utf-8")
        h[.contentSecurityPolicy] = Self.contentSecurityPolicy
        let html = "<!doctype html><meta charset=utf-8><title>Reel: sign in</title><p>Wrong password. <a href=\"/signin\">Try again</a>.</p>\n"
        return Response(status: .unauthorized, headers: h, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// POST /signout: the session ends and the cookie is cleared.
    func signOut(_ request: WebRequest) -> Response {
        if let token = request.cookies[Self.cookieName]?.value {
            sessions.withLock { $0.close(token) }
        }
        return Self.redirect("/signin", cookie: sessionCookie("", clear: true))
    }

    func sessionCookie(_ token: String, clear: Bool = false) -> String {
        var cookie = "\(Self.cookieName)=\(token); HttpOnly; SameSite=Strict; Path=/"
        if settings.secureCookie { cookie += "; Secure" }
        if clear { cookie += "; Max-Age=0" }
        return cookie
    }

    static func sleep(until deadline: Nanos) async throws {
        let left = deadline - SystemClock.now()
        if left > 0 { try await Task.sleep(nanoseconds: UInt64(left)) }
    }

    /// GET /api/status: reeld's status object.
    func status() async -> Response {
        switch await link.status() {
        case let .success(json): return Self.json(200, json)
        case let .failure(why): return Self.json(502, CommandOutcome(unreachable: why.message).body)
        }
    }

    /// The JSON bodies the commands take; every field optional.
    struct CommandBody: Decodable {
        var name: String?
        var label: String?
        var maxDurationNs: Nanos?
    }

    /// POST /api/start, pause, resume, undo, stop: reeld's reply, as it came.
    func command(_ cmd: Command, _ request: inout WebRequest) async throws -> Response {
        let raw = try await request.collectBody(upTo: Self.maxBodyBytes)
        var body = CommandBody()
        if raw.readableBytes > 0 {
            do {
                body = try JSONDecoder().decode(CommandBody.self, from: Data(raw.readableBytesView))
            } catch {
                return Self.json(400, CommandOutcome.refusal(.badRequest("the body of POST /api/\(cmd.rawValue) is not the JSON object it takes ({\"name\"?, \"label\"?, \"maxDurationNs\"?}): \(error)")))
            }
        }
        var req = ReelControl.Request(id: 1, cmd: cmd)
        switch cmd {
        case .start:
            req.name = body.name
            req.label = body.label
            req.maxDurationNs = body.maxDurationNs
        case .resume:
            req.label = body.label
        default:
            break
        }
        let outcome = await link.perform(req)
        if outcome.httpStatus != 200 {
            logger.notice("\(cmd.rawValue) refused: \(String(decoding: outcome.body.prefix(300), as: UTF8.self))")
        }
        return Self.json(outcome.httpStatus, outcome.body)
    }

    /// GET /api/recordings: the finished recordings, newest first.
    func recordingList() async -> Response {
        do {
            let entries = try await pool.run { [recordings] in try recordings.list() }
            return Self.json(200, Array(try Wire.text(entries).utf8))
        } catch {
            logger.error("cannot list the recordings in \(settings.recordingsDir): \(error)")
            return Self.json(500, CommandOutcome.refusal(.failed("cannot list the recordings in \(settings.recordingsDir): \(error) (is --recordings reeld's output directory, and may reel-web read it?)")))
        }
    }
}
