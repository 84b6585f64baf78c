import ReelControl
import ReelCore
@testable import ReelService
import ReelStorage
import XCTest

/// Every state the recorder's threads can drive `RecorderLifecycle` into, and every event from
/// each, checked against an oracle that keeps its own account: the lock holder (a start or a stop:
/// the recorder runs one at a time), the sessions made and whether each ending was taken, the
/// reports in progress, shutdown, standby, and the rules for lastFile and lastError. Concurrently
/// with the holder: a pipeline that ends by itself, the watcher thread taking its ending, a report
/// done, shutdown, a standby change, a free-space tick. Up to two recordings are made; the
/// states are searched breadth first until none is new, so every reachable one is visited.
final class RecorderLifecycleModelTests: XCTestCase {
    typealias M = RecorderLifecycle

    /// What a session ends with, decided by its pipeline when it is made (`o` indexes `outcomes`).
    struct Session: Hashable {
        let id: Int
        let n: Int
        let o: Int
        var pipelineEnded = false
        var stopTaken = false
        var watcherTook = false
        var taken = false
        var part: String { "/v/r\(n).mp4.part" }
        var final: String { "/v/r\(n).mp4" }
    }

    static let outcomeCount = 7
    static func outcome(_ s: Session) -> (RecordingOutcome, M.EndFacts) {
        let p = s.part, f = s.final
        switch s.o {
        case 0: return (.complete(file: f), M.EndFacts(handedOff: FinishedFile(path: f, by: .stop), leftover: f))
        case 1: return (.cutShort(kept: .file(f), reason: .sourceFailed("S\(s.n)")),
                        M.EndFacts(handedOff: FinishedFile(path: f, by: .sourceFailed), leftover: f))
        case 2: return (.cutShort(kept: .file(f), reason: .writeFailed("W\(s.n)")),
                        M.EndFacts(handedOff: FinishedFile(path: f, by: .writeFailed), leftover: f))
        case 3: return (.cutShort(kept: .unrecovered(p), reason: .writeFailed("U\(s.n)")), M.EndFacts(handedOff: nil, leftover: p))
        case 4: return (.failed("F\(s.n)"), M.EndFacts(handedOff: nil, leftover: nil))
        case 5: return (.failed("G\(s.n)"), M.EndFacts(handedOff: FinishedFile(path: f, by: .error), leftover: f))
        default: return (.nothingKept, M.EndFacts())
        }
    }

    enum Holder: Hashable { case none, start, stop(id: Int, accepted: Bool) }

    enum Event: Hashable {
        case askStart, startRefused, startFailed, started(outcome: Int)
        case askStop, pipelineRefusesStop, stopAccepted, stopTimesOut, stopTakesEnding
        case pipelineEnds, watcherTakesEnding, reported, shutdown, standby(String?), lowSpace
    }

    struct World: Hashable {
        var m = M()
        var holder = Holder.none
        /// Sessions whose ending was taken by both its stop's wait and the watcher drop out
        /// (`retired`), so that the states are finite.
        var sessions: [Session] = []
        var retired = 0
        var reports = 0
        var closing = false
        var lastFile: String?
        var lastError: String?
        var standbyFailure: String?

        var untaken: [Session] { sessions.filter { !$0.taken } }
        var made: Int { retired + sessions.count }
    }

    /// What may happen next.
    func enabled(_ w: World) -> [Event] {
        var e: [Event] = []
        switch w.holder {
        case .none: e += [.askStart, .askStop]
        case .start:
            e += [.startRefused, .startFailed]
            if w.made < 2 { e += (0..<Self.outcomeCount).map { .started(outcome: $0) } }
        case let .stop(id, accepted):
            if !accepted { e += [.pipelineRefusesStop, .stopAccepted] } else {
                e.append(.stopTimesOut)
                if w.sessions.first(where: { $0.id == id })!.pipelineEnded { e.append(.stopTakesEnding) }
            }
        }
        if w.sessions.contains(where: { !$0.pipelineEnded }) { e.append(.pipelineEnds) }
        if w.sessions.contains(where: { $0.pipelineEnded && !$0.watcherTook }) { e.append(.watcherTakesEnding) }
        if w.untaken.contains(where: { !$0.pipelineEnded }) { e.append(.lowSpace) }
        if w.reports > 0 { e.append(.reported) }
        if !w.closing { e.append(.shutdown) }
        e += [.standby(nil), .standby("A")]  // a second failure after another: RecorderLifecycleTests
        return e
    }

    /// Applies `event`, checking the machine's answer against the oracle; nil when they disagree
    /// (`why` says how).
    func step(_ w0: World, _ event: Event, _ why: inout String) -> World? {
        var w = w0
        func fail(_ s: String) -> World? { why = s; return nil }
        switch event {
        case .askStart:
            let refusal = w.m.startAsked()
            let expected = w.closing || !w.untaken.isEmpty
            if (refusal != nil) != expected { return fail("start refused: \(refusal as Any), expected refused: \(expected)") }
            if let refusal {
                if w.closing, !refusal.message.contains("shutting down") { return fail("refused after shutdown with: \(refusal)") }
                if !w.closing, !refusal.message.contains(w.untaken[0].part) { return fail("refusal does not name the file: \(refusal)") }
            } else { w.holder = .start }
        case .startRefused:
            _ = w.m.startRefused(.badRequest("bad"))
            w.holder = .none
        case .startFailed:
            let (steps, answer) = w.m.startFailed("E-start")
            if answer != .failed("E-start") || !steps.contains(.error("E-start", .start)) { return fail("start failure reported as \(steps), \(answer)") }
            w.lastError = "E-start"
            w.holder = .none
        case let .started(o):
            if !w.untaken.isEmpty { return fail("a second recording while \(w.untaken) is under way") }
            let n = w.made + 1
            let (r, _) = w.m.started(part: "/v/r\(n).mp4.part", final: "/v/r\(n).mp4", dir: "/v", minFreeBytes: 1, warm: n % 2 == 0,
                                     video: "test", audio: "none")
            if w.sessions.contains(where: { $0.id == r.id }) { return fail("id \(r.id) given twice") }
            w.sessions.append(Session(id: r.id, n: n, o: o))
            w.lastError = nil
            w.holder = .none
        case .askStop:
            switch w.m.stopAsked() {
            case let .success(r):
                guard let s = w.untaken.first, s.id == r.id else { return fail("stop of \(r) while \(w.untaken) is under way") }
                w.holder = .stop(id: r.id, accepted: false)
            case .failure:
                if !w.untaken.isEmpty { return fail("stop refused while \(w.untaken) is under way") }
            }
        case .pipelineRefusesStop:
            w.holder = .none
        case .stopAccepted:
            guard case let .stop(id, _) = w.holder else { return fail("no stop") }
            w.m.stopAccepted(id: id)
            w.holder = .stop(id: id, accepted: true)
            let i = w.sessions.firstIndex { $0.id == id }!
            w.sessions[i].stopTaken = true
            if !w.sessions[i].taken, w.m.phase != .stopping(w.m.recording!) { return fail("not stopping after its stop was taken: \(w.m.phase)") }
        case .stopTimesOut:
            w.holder = .none
        case .stopTakesEnding:
            guard case let .stop(id, _) = w.holder else { return fail("no stop") }
            let i = w.sessions.firstIndex { $0.id == id }!
            if let problem = take(&w, i) { return fail(problem) }
            let (outcome, _) = Self.outcome(w.sessions[i])
            let answer = M.stopAnswer(outcome, part: w.sessions[i].part)
            switch (outcome, answer) {
            case let (.complete(f), .ok(g)), let (.cutShort(.file(f), .sourceFailed), .ok(g)): if f != g { return fail("stop answered \(answer)") }
            case (.nothingKept, .ok(nil)), (.cutShort, .error), (.failed, .error): break
            default: return fail("\(outcome) answered \(answer)")
            }
            w.holder = .none
        case .pipelineEnds:
            let i = w.sessions.firstIndex { !$0.pipelineEnded }!
            w.sessions[i].pipelineEnded = true
        case .watcherTakesEnding:
            let i = w.sessions.firstIndex { $0.pipelineEnded && !$0.watcherTook }!
            w.sessions[i].watcherTook = true
            if let problem = take(&w, i) { return fail(problem) }
        case .reported:
            w.m.reported()
            w.reports -= 1
        case .shutdown:
            let stop = w.m.shutdown()
            w.closing = true
            // A start under way makes a recording: it is stopped once made (the stop waits for the lock).
            if stop != (!w.untaken.isEmpty || w.holder == .start) { return fail("shutdown says stop: \(stop) with \(w.holder), \(w.untaken) under way") }
        case let .standby(f):
            let steps = w.m.standby(failure: f)
            let new = f != nil && f != w.standbyFailure
            if steps.isEmpty == new { return fail("standby \(f ?? "ok") after \(w.standbyFailure ?? "ok") reported: \(steps)") }
            if let f, new { w.lastError = "standby: \(f); reeld keeps retrying (check the device)" }
            w.standbyFailure = f
        case .lowSpace:
            let s = w.untaken.first { !$0.pipelineEnded }!
            let steps = w.m.freeSpace(0, in: "/v", stopping: false, of: s.id)
            if steps.isEmpty != s.stopTaken { return fail("low space while \(s.stopTaken ? "stopping" : "recording"): \(steps)") }
            if !steps.isEmpty {
                guard case let .error(message, .lowSpace) = steps[1], steps.last == .stop else { return fail("low space reported as \(steps)") }
                w.lastError = message
            }
        }
        return check(w, &why)
    }

    /// Takes session `i`'s ending (the stop's or the watcher's call): the first report, later nil.
    func take(_ w: inout World, _ i: Int) -> String? {
        let s = w.sessions[i]
        let (outcome, facts) = Self.outcome(s)
        let end = w.m.ended(id: s.id, outcome, facts)
        if s.taken { return end == nil ? nil : "the ending of \(s.part) reported twice" }
        guard let end else { return "the ending of \(s.part) not reported" }
        w.sessions[i].taken = true
        w.reports += 1
        if end.giveBack != (s.n % 2 == 0) { return "devices of \(s.part): give back \(end.giveBack)" }
        // The oracle's rules for status.
        switch s.o {
        case 0: w.lastFile = s.final
        case 1: w.lastFile = s.final; w.lastError = "S\(s.n); the recording was finished early into \(s.final)"
        case 2: w.lastFile = s.final; w.lastError = "W\(s.n)"
        case 3: w.lastFile = s.part; w.lastError = "U\(s.n)"
        case 4: w.lastError = "F\(s.n)"
        case 5: w.lastFile = s.final; w.lastError = "G\(s.n)"
        default: break
        }
        // The `finished` event: the file handed on, none when nothing was kept, else not sent.
        let finished = end.steps.filter { if case .finished = $0 { return true }; return false }
        let announced: [M.Step] = (facts.handedOff?.path ?? outcome.file).map { [.finished(file: $0)] }
            ?? (outcome == .nothingKept ? [.finished(file: nil)] : [])
        if finished != announced { return "\(outcome): \(finished)" }
        // Handed on exactly once when the session left a finished file.
        let handOns = end.steps.filter { if case .handOn = $0 { return true }; return false }
        if handOns.count != (facts.handedOff != nil || outcome.file != nil ? 1 : 0) { return "\(outcome): handed on \(handOns)" }
        return nil
    }

    /// The invariants, after every event; then sessions no event refers to any more retire.
    func check(_ w0: World, _ why: inout String) -> World? {
        var w = w0
        let untaken = w.untaken
        let broken: String? =
            untaken.count > 1 ? "two recordings at once" :
            w.m.recording?.id != untaken.first?.id ? "the recording under way is \(w.m.recording as Any), not \(untaken)" :
            (w.m.phase == .starting) != (w.holder == .start) ? "phase \(w.m.phase) with \(w.holder) holding the lock" :
            w.m.reporting != w.reports ? "\(w.m.reporting) reports in progress, not \(w.reports)" :
            w.m.isQuiet != (w.holder != .start && untaken.isEmpty && w.reports == 0) ? "quiet: \(w.m.isQuiet)" :
            w.m.closing != w.closing ? "closing: \(w.m.closing)" :
            w.m.lastFile != w.lastFile ? "lastFile \(w.m.lastFile ?? "nil"), not \(w.lastFile ?? "nil")" :
            w.m.lastError != w.lastError ? "lastError \(w.m.lastError ?? "nil"), not \(w.lastError ?? "nil")" : nil
        if let broken { why = broken; return nil }
        let held: Int? = if case let .stop(id, _) = w.holder { id } else { nil }
        while let first = w.sessions.first, first.taken, first.watcherTook, first.id != held {
            w.sessions.removeFirst()
            w.retired += 1
        }
        return w
    }

    func testEveryReachableStateKeepsTheRules() {
        var seen: Set<World> = [World()]
        var frontier = [(World(), [Event]())]
        var edges = 0
        var endings = 0
        while !frontier.isEmpty {
            var next: [(World, [Event])] = []
            for (w, path) in frontier {
                for e in enabled(w) {
                    edges += 1
                    var why = "an invariant"
                    guard let w2 = step(w, e, &why) else {
                        let events = (path + [e]).map { "\($0)".replacingOccurrences(of: "\(Event.self).", with: "") }
                        return XCTFail("\(why), after \(events.joined(separator: ", ")), from:\n\(w)")
                    }
                    if w2.reports > w.reports { endings += 1 }
                    if seen.insert(w2).inserted { next.append((w2, path + [e])) }
                }
            }
            frontier = next
        }
        // Not vacuous: the search reached many states, and endings of every kind.
        XCTAssertGreaterThan(seen.count, 10_000)
        XCTAssertGreaterThan(endings, 1_000)
        print("RecorderLifecycleModelTests: \(seen.count) states, \(edges) events, \(endings) endings taken")
    }
}
