import ArgumentParser
import Foundation
import Logging
import ReelControl
import ReelWeb

@main
struct ReelWebCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reel-web",
        abstract: "The booth page: an HTTP server that shows reeld's preview and levels and starts, pauses and stops recordings through reeld's control socket.",
        subcommands: [Serve.self, HashPassword.self],
        defaultSubcommand: Serve.self)
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the page (the default).",
        discussion: """
            Every page, API, preview and recording URL needs a session: sign in at /signin with the \
            password whose hash --password-file holds (make one with 'reel-web hash-password'). \
            reel-web speaks to reeld only through its control socket, and reads the recordings \
            directory read-only. Put it behind a TLS proxy (and give --secure-cookie) to reach it \
            from another machine.
            """)

    @Option(name: .long, help: ArgumentHelp("Address and port to listen on (IPv6 as [::1]:8080).", valueName: "host:port"))
    var listen = ListenAddress.default.description

    @Option(name: .long, help: ArgumentHelp(
        "Path of reeld's control socket (default: $\(SocketPath.environmentVariable), else \(SocketPath.defaultPath)).", valueName: "path"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("reeld's output directory, whose finished recordings the page lists and serves (default: \(WebDefaults.recordingsDir)).", valueName: "dir"))
    var recordings = WebDefaults.recordingsDir

    @Option(name: .customLong("outbox-dir"), help: ArgumentHelp("reeld's outbox_dir: a recording waiting there for upload (a hard link, so two names) is listed and served too; without it only files with one name are.", valueName: "dir"))
    var outboxDir: String?

    @Option(name: .customLong("password-file"), help: ArgumentHelp("File holding the sign-in password's hash (one line from 'reel-web hash-password').", valueName: "path"))
    var passwordFile: String?

    @Flag(name: .customLong("no-auth"), help: "Serve without signing in (only for a page on a trusted machine: anyone who reaches the port can record).")
    var noAuth = false

    @Flag(name: .customLong("secure-cookie"), help: "The page is reached over HTTPS (through a TLS proxy): mark the session cookie Secure and expect https:// origins.")
    var secureCookie = false

    @Option(name: .customLong("origin"), help: ArgumentHelp("A further origin allowed to send state-changing requests, e.g. https://booth.example (repeatable).", valueName: "url"))
    var origins: [String] = []

    @Option(name: .customLong("web-root"), help: ArgumentHelp("Directory of the page's files (default: PREFIX/share/reel/web beside the binary).", valueName: "dir"))
    var webRoot: String?

    func validate() throws {
        guard ListenAddress(parsing: listen) != nil else { throw ValidationError("--listen must be HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080") }
        if passwordFile == nil && !noAuth {
            throw ValidationError("give --password-file (make its line with 'reel-web hash-password'), or --no-auth to serve without signing in")
        }
        if passwordFile != nil && noAuth { throw ValidationError("--password-file and --no-auth exclude each other") }
        for origin in origins where OriginCheck.normalize(origin) == nil {
            throw ValidationError("--origin \(origin) is not an origin: give scheme://host[:port], e.g. https://booth.example")
        }
    }

    func run() async throws {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "reel-web")
        logger.logLevel = .info
        var hash: String?
        if let passwordFile {
            let text: String
            do {
                text = try String(contentsOfFile: passwordFile, encoding: .utf8)
            } catch {
                throw ValidationError("cannot read --password-file \(passwordFile): \(error.localizedDescription) (does it exist, and may reel-web read it?)")
            }
            do {
                hash = try Password.parseFile(text, path: passwordFile)
            } catch {
                throw ValidationError("\(error)")
            }
        } else {
            logger.warning("--no-auth: anyone who reaches \(listen) can watch, record and download without signing in")
        }
        let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
        guard let web = StaticFiles.locate(explicit: webRoot, executable: executable) else {
            throw ValidationError("cannot find the page's files (index.html) beside \(executable): give --web-root DIR or reinstall reel-web")
        }
        let settings = WebSettings(
            socketPath: SocketPath.resolve(explicit: socket, environment: ProcessInfo.processInfo.environment),
            recordingsDir: recordings, webRoot: web, passwordHash: hash, secureCookie: secureCookie, extraOrigins: origins,
            outboxDir: outboxDir)
        logger.info("reeld socket \(settings.socketPath), recordings \(settings.recordingsDir), page files \(web)")
        try await WebServer.run(WebApp(settings: settings, logger: logger), listen: ListenAddress(parsing: listen)!, logger: logger)
    }
}

struct HashPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash-password",
        abstract: "Read a password on stdin and print its yescrypt hash, the line --password-file holds.",
        discussion: "e.g. 'reel-web hash-password > /etc/reel/web-password' (type the password, then Enter and Ctrl-D).")

    func run() throws {
        var input = FileHandle.standardInput.readDataToEndOfFile()
        while let last = input.last, last == 10 || last == 13 { input.removeLast() }
        guard let password = String(data: input, encoding: .utf8) else {
            throw ValidationError("the password is not UTF-8 text")
        }
        do {
            print(try Password.hash(password))
        } catch {
            throw ValidationError("\(error)")
        }
    }
}
