import Foundation
import ReelConfig
import ReelControl

/// What the fuzzers check on one input, shared by the libFuzzer entry points (`fuzz-request`,
/// `fuzz-config`; `make fuzz`) and the replay of the seed corpora and regression inputs in
/// `make test` (Tests/ReelFuzzTests). A trap inside the code under test is a crash; a broken
/// invariant comes back as a list of problems, which the fuzz entry points turn into a crash.
public enum FuzzChecks {
    /// The longest input worth fuzzing per target (`-max_len`): the server refuses longer request
    /// lines before parsing; a config file has no limit, but the shipped one is about 5 kB.
    public static let requestMaxLen = Wire.maxLineBytes
    public static let configMaxLen = 16 * 1024

    /// The path the config text pretends to come from (it is only used in messages).
    public static let configPath = "/etc/reel/reeld.toml"

    // MARK: the request parser

    /// `bytes` as the control server sees them: split at `\n` into lines, blank lines ignored,
    /// each line handed to `Wire.parseRequest`. Checks each outcome:
    /// - accepted: version 1; a `name` only on `start`, and then a valid one; the request,
    ///   encoded again as `reelctl` would send it, parses to the same request;
    /// - refused: a `bad_request` with a message, and the error reply the server sends is one
    ///   line of JSON that decodes to the same reply (it quotes the client's text).
    public static func request(_ bytes: some Collection<UInt8>) -> [String] {
        var problems: [String] = []
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0d }) { continue }  // as ControlServer.advance
            problems += requestLine(Array(line))
        }
        return problems
    }

    static func requestLine(_ line: [UInt8]) -> [String] {
        let shown = String(decoding: line.prefix(200), as: UTF8.self).debugDescription
        switch Wire.parseRequest(line) {
        case .success(let request):
            var problems: [String] = []
            if request.v != protocolVersion { problems.append("accepted version \(request.v) in \(shown)") }
            if request.cmd != .start, request.name != nil { problems.append("kept a name on \(request.cmd) in \(shown)") }
            if let name = request.name, let why = Wire.nameProblem(name) { problems.append("accepted a bad name (\(why)) in \(shown)") }
            do {
                let again = Wire.parseRequest(try Wire.line(request).dropLast())
                if again != .success(request) { problems.append("\(request) does not survive encode + parse (\(again)) from \(shown)") }
            } catch {
                problems.append("cannot encode accepted \(request) from \(shown): \(error)")
            }
            return problems
        case .failure(let problem):
            var problems: [String] = []
            if problem.error.code != ControlError.Code.badRequest { problems.append("refused with \(problem.error.code), not bad_request: \(shown)") }
            if problem.error.message.isEmpty { problems.append("refused without a message: \(shown)") }
            problems += replyLine(Reply.failure(problem.error, id: problem.id), for: shown)
            return problems
        }
    }

    /// The reply as the server writes it: one line, valid JSON, the same reply when decoded.
    static func replyLine(_ reply: Reply, for shown: String) -> [String] {
        let bytes: [UInt8]
        do { bytes = try Wire.line(reply) } catch { return ["cannot encode the reply to \(shown): \(error)"] }
        guard bytes.last == UInt8(ascii: "\n"), !bytes.dropLast().contains(UInt8(ascii: "\n")) else {
            return ["the reply to \(shown) is not exactly one line"]
        }
        do {
            let decoded = try JSONDecoder().decode(Reply.self, from: Data(bytes))
            return decoded == reply ? [] : ["the reply to \(shown) decodes as \(decoded), not \(reply)"]
        } catch {
            return ["the reply to \(shown) is not valid JSON (\(String(decoding: bytes, as: UTF8.self).debugDescription)): \(error)"]
        }
    }

    // MARK: the config loader

    /// `bytes` as the content of reeld.toml, loaded as `DaemonSettings.apply(file:)` loads a
    /// file's bytes. If they are UTF-8, checks the TOML reader alone first: each root key once,
    /// with a value and a line of the text; a syntax error on a line of the text. Then the
    /// outcome of loading:
    /// - accepted: every key keeps its default or comes from this file; `--check-config`'s
    ///   report lists every key; what is kept as written passes its key's check again;
    /// - refused: the message names the file;
    /// - both: a second load of the same text gives the same outcome.
    /// Then the same text through a `REEL_*` variable (`environment`).
    public static func config(_ bytes: some Collection<UInt8>) -> [String] {
        let data = Data(bytes)
        let text = String(validating: data, as: UTF8.self)
        let shown = String(decoding: data.prefix(200), as: UTF8.self).debugDescription
        var problems: [String] = []
        let lineCount = data.reduce(1) { $0 + ($1 == 0x0A ? 1 : 0) }
        if let text {  // the TOML reader alone
            do {
                let document = try TOMLDocument(parsing: text)
                if Set(document.keys).count != document.keys.count { problems.append("TOMLDocument lists a key twice for \(shown)") }
                for key in document.keys where document[key] == nil || !(1...lineCount).contains(document.line(of: key) ?? 0) {
                    problems.append("TOMLDocument has no value or line for key \(key.debugDescription) in \(shown)")
                }
            } catch {
                if !(1...lineCount).contains(error.line) { problems.append("syntax error on line \(error.line) of \(lineCount) in \(shown)") }
            }
        }
        let first = load(data), second = load(data)
        switch (first, second) {
        case let (.success(a), .success(b)):
            if a.values != b.values || a.given != b.given { problems.append("two loads of \(shown) differ") }
            for key in SettingKey.allCases {
                switch a.origin(of: key) {
                case .defaultValue: continue
                case .file(let path, _) where path == configPath: break
                default: problems.append("key '\(key.rawValue)' has origin \(a.origin(of: key)) after loading \(shown)")
                }
                if let problem = key.spec.check(a.written(key)) {
                    problems.append("key '\(key.rawValue)' was kept as \(a.written(key)), which its check refuses: \(problem)")
                }
            }
            let report = a.report
            if let key = SettingKey.allCases.first(where: { !report.contains("\($0.rawValue) = ") }) {
                problems.append("the report of \(shown) lacks key '\(key.rawValue)'")
            }
        case let (.failure(a), .failure(b)):
            if a.description != b.description { problems.append("two loads of \(shown) fail differently: \(a) / \(b)") }
            if !a.description.hasPrefix(configPath) { problems.append("the error for \(shown) does not name the file: \(a)") }
        default:
            problems.append("two loads of \(shown) disagree: \(first) / \(second)")
        }
        return problems + (text.map(environment) ?? [])
    }

    /// The text after its first character as the value of one `REEL_*` variable (the first
    /// character picks which), cut at a NUL as an environment value is: either it is taken, or
    /// the error names the variable.
    static func environment(_ text: String) -> [String] {
        guard let first = text.unicodeScalars.first else { return [] }
        let key = SettingKey.allCases[Int(first.value) % SettingKey.allCases.count]
        let variable = key.environmentVariable
        let value = String(text.unicodeScalars.dropFirst().prefix { $0 != "\0" })
        do {
            let settings = try DaemonSettings.resolve(configPath: "/dev/null", environment: [variable: value], flags: [:])
            return settings.origin(of: key) == .environment(variable) ? [] : ["\(variable)=\(value.debugDescription) was ignored"]
        } catch {
            return error.origin == .environment(variable) && error.description.contains(variable) ? []
                : ["\(variable)=\(value.debugDescription) was refused without naming it: \(error)"]
        }
    }

    static func load(_ data: Data) -> Result<DaemonSettings, ConfigError> {
        var settings = DaemonSettings()
        do throws(ConfigError) {
            try settings.apply(data: data, path: configPath)
            return .success(settings)
        } catch {
            return .failure(error)
        }
    }
}

// MARK: replay without libFuzzer

extension FuzzChecks {
    /// The regular files in `path` (a directory, sorted by name) or `path` itself.
    public static func inputs(at path: String) throws -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: path])
        }
        guard isDirectory.boolValue else { return [path] }
        return try FileManager.default.contentsOfDirectory(atPath: path).sorted()
            .filter { !$0.hasPrefix(".") }.map { path + "/" + $0 }
    }

    /// libFuzzer's body for one input, the same in every target: the input copied at once (it is
    /// valid for this call only), `check` run on it, and a trap naming the problems if it has any
    /// (libFuzzer then keeps the input as a crash).
    public static func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int, _ check: ([UInt8]) -> [String]) -> Int32 {
        // Unsafe pointer: libFuzzer's input, valid for this call only, so it is copied at once.
        let bytes = size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
        let problems = check(bytes)
        if !problems.isEmpty { fatalError(problems.joined(separator: "\n")) }
        return 0
    }

    /// The non-fuzzing build of `fuzz-request`/`fuzz-config`: runs `check` on every file named
    /// (or in every directory named) and prints each problem; exit status 1 if any, 2 on a usage
    /// or read error.
    public static func replayMain(_ check: ([UInt8]) -> [String], corpus: String) -> Int32 {
        let arguments = CommandLine.arguments.dropFirst()
        guard !arguments.isEmpty, !arguments.contains(where: { $0.hasPrefix("-") }) else {
            let me = (CommandLine.arguments.first ?? "fuzz").split(separator: "/").last ?? ""
            print("usage: \(me) FILE|DIR...   (e.g. \(corpus)) replays inputs through the fuzz checks;",
                  "`make fuzz` builds the libFuzzer version of this program")
            return 2
        }
        var failed = 0, count = 0
        for argument in arguments {
            do {
                for file in try inputs(at: argument) {
                    count += 1
                    let problems = check(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
                    for problem in problems { print("\(file): \(problem)") }
                    if !problems.isEmpty { failed += 1 }
                }
            } catch {
                print("cannot read \(argument): \(error.localizedDescription) (name files or directories of fuzz inputs)")
                return 2
            }
        }
        print("\(count) inputs, \(failed) with problems")
        return failed == 0 ? 0 : 1
    }
}

// MARK: TOML reader against another one

extension FuzzChecks {
    /// What `TOMLDocument` makes of `bytes`, as one JSON line for scripts/toml_oracle.py, which
    /// compares it with Python's tomllib: `{"ok":true,"keys":{...}}`, `{"ok":false,"line":N,...}`,
    /// or `{"utf8":false}`.
    public static func tomlJSON(_ bytes: [UInt8]) -> String {
        struct Node: Encodable {
            var type: String
            var string: String?
            var int: Int?
            var array: [Node]?
            init(_ v: TOMLDocument.Value) {
                type = v.type.rawValue
                string = v.string
                int = v.int
                array = v.array?.map(Node.init)
            }
        }
        struct Dump: Encodable {
            var utf8 = true
            var ok: Bool?
            var line: Int?
            var error: String?
            var keys: [String: Node]?
        }
        var dump = Dump()
        if let text = String(validating: bytes, as: UTF8.self) {
            do {
                let document = try TOMLDocument(parsing: text)
                dump.ok = true
                dump.keys = Dictionary(uniqueKeysWithValues: document.keys.map { ($0, Node(document[$0]!)) })
            } catch {
                dump.ok = false
                dump.line = error.line
                dump.error = error.description
            }
        } else {
            dump.utf8 = false
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(dump)) ?? Data("{}".utf8), as: UTF8.self)
    }
}
