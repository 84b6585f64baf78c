import ReelControl
import XCTest

@testable import ReelWeb

/// Who may reach what: every route but the sign-in page, its form and its own static files needs a session.
final class WebRouteTests: XCTestCase {
    func testRoutes() {
        XCTAssertEqual(WebRoute.match(method: "GET", path: "/"), .page)
        XCTAssertEqual(WebRoute.match(method: "GET", path: "/signin"), .signinPage)
        XCTAssertEqual(WebRoute.match(method: "POST", path: "/signin"), .signin)
        XCTAssertEqual(WebRoute.match(method: "POST", path: "/api/start"), .command(.start))
        XCTAssertEqual(WebRoute.match(method: "GET", path: "/api/start"), .methodNotAllowed)
        XCTAssertEqual(WebRoute.match(method: "POST", path: "/api/set"), .notFound)  // not a page command
        XCTAssertEqual(WebRoute.match(method: "GET", path: "/recordings/a%2e%2e.mp4"), .recording("a%2e%2e.mp4"))
        XCTAssertEqual(WebRoute.match(method: "GET", path: "/static/app.js"), .staticFile("app.js"))
        XCTAssertEqual(WebRoute.match(method: "GET", path: "/nothing"), .notFound)
    }

    func testOnlyTheSignInPartsArePublic() {
        let open: [WebRoute] = [.signinPage, .signin, .staticFile("signin.css"), .staticFile("signin.js")]
        let closed: [WebRoute] = [.page, .signout, .staticFile("app.js"), .staticFile("index.html"), .status, .events,
                                  .command(.start), .command(.stop), .preview, .recordings, .recording("a.mp4"), .notFound,
                                  .methodNotAllowed]
        for r in open { XCTAssertTrue(r.isPublic, "\(r)") }
        for r in closed { XCTAssertFalse(r.isPublic, "\(r)") }
        XCTAssertEqual(WebRoute.page.withoutSession, 303)
        XCTAssertEqual(WebRoute.status.withoutSession, 401)
    }

    func testFormAndListenParsing() {
        XCTAssertEqual(FormBody.field("password", in: "user=x&password=a+b%26c%3D"), "a b&c=")
        XCTAssertEqual(FormBody.field("password", in: "password="), "")
        XCTAssertNil(FormBody.field("password", in: "pass=x"))
        XCTAssertEqual(ListenAddress(parsing: "0.0.0.0:80"), ListenAddress(host: "0.0.0.0", port: 80))
        XCTAssertEqual(ListenAddress(parsing: "[::1]:8080"), ListenAddress(host: "::1", port: 8080))
        XCTAssertNil(ListenAddress(parsing: "::1:8080"))
        XCTAssertNil(ListenAddress(parsing: "host"))
        XCTAssertNil(ListenAddress(parsing: "host:70000"))
        XCTAssertEqual(ListenAddress(host: "::1", port: 1).description, "[::1]:1")
    }

    func testEventStreamTextAndPreviewParts() {
        XCTAssertEqual(SSE.message(event: "status", data: "{\"a\":1}"), "event: status\ndata: {\"a\":1}\n\n")
        XCTAssertEqual(SSE.message(event: "x", data: "a\nb"), "event: x\ndata: a\ndata: b\n\n")
        XCTAssertEqual(SSE.down("gone \"away\""), "event: down\ndata: {\"message\":\"gone \\\"away\\\"\"}\n\n")
        XCTAssertEqual(SSE.levelsData(Array(#"{"v":1,"event":"levels","peakDbfs":[-6.0,-7.1],"rmsDbfs":[-12.3,-120.0],"capturedNs":5,"at":6}"#.utf8)),
                       #"{"peakDbfs":[-6.0,-7.1],"rmsDbfs":[-12.3,-120.0],"capturedNs":5}"#)
        let line = Array(#"{"v":1,"event":"preview","seq":1,"width":2,"height":2,"capturedNs":42,"dropped":0,"bytes":3,"jpeg":"/9j/","at":43}"#.utf8)
        let part = String(decoding: PreviewHub.part(fromLine: line) ?? [], as: UTF8.self)
        XCTAssertTrue(part.hasPrefix("--reelframe\r\nContent-Type: image/jpeg\r\nContent-Length: 3\r\nX-Captured-Ns: 42\r\n\r\n"), part)
        XCTAssertNil(PreviewHub.part(fromLine: Array(#"{"v":1,"event":"preview_state","live":false,"reason":"no camera","at":1}"#.utf8)))
    }

    func testReelDsRepliesMapToHTTPStatuses() {
        XCTAssertEqual(CommandOutcome(replyLine: Array(#"{"v":1,"id":1,"ok":true}"#.utf8)).httpStatus, 200)
        XCTAssertEqual(CommandOutcome(replyLine: Array(#"{"v":1,"id":1,"ok":false,"error":{"code":"wrong_state","message":"idle"}}"#.utf8)).httpStatus, 409)
        XCTAssertEqual(CommandOutcome(replyLine: Array("garbage".utf8)).httpStatus, 502)
        XCTAssertEqual(CommandOutcome(unreachable: "no reeld").httpStatus, 502)
    }
}
