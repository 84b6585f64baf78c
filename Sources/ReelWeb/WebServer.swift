import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// Runs reel-web's HTTP server until SIGTERM or SIGINT: then the event and preview streams end
/// first (they would hold a graceful shutdown forever), then the server finishes what is left.
public enum WebServer {
    public static func run(_ app: WebApp, listen: ListenAddress, logger: Logger) async throws {
        let responder = CallbackResponder<WebContext> { request, context in
            try await app.respond(to: request, context: context)
        }
        let application = Application(
            responder: responder,
            configuration: .init(address: .hostname(listen.host, port: listen.port), serverName: nil),
            onServerRunning: { channel in
                let bound = channel.localAddress.map { "\($0.ipAddress ?? listen.host):\($0.port ?? listen.port)" } ?? "\(listen)"
                logger.notice("reel-web listening on \(bound)")
            },
            logger: logger)
        // Shut down in reverse order: the stream closer first.
        let group = ServiceGroup(configuration: .init(
            services: [application, StreamCloser(app: app)] as [any Service],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

/// Waits for the graceful shutdown, then ends the long responses.
struct StreamCloser: Service {
    let app: WebApp
    func run() async throws {
        try? await gracefulShutdown()
        app.endStreams()
    }
}

/// `--listen HOST:PORT` (IPv6 as `[::1]:8080`).
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: Int
    public static let `default` = ListenAddress(host: "127.0.0.1", port: 8080)

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// nil when `text` is not HOST:PORT with a port 0 ... 65535.
    public init?(parsing text: String) {
        let host: Substring, port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
            if host.contains(":") { return nil }
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" }),
              let p = Int(port), (0...65535).contains(p) else { return nil }
        self.init(host: String(host), port: p)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
