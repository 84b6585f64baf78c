import Foundation
import Logging
import ReelCapture
import ReelControl
import ReelCore
import ReelMedia
import ReelPipeline
import ReelStorage
import ReelSystem

/// The commands that make, steer and end a recording. What each may do and what each ending
/// reports is `RecorderLifecycle`'s decision; these open, start, stop and hand on.
extension Recorder {
    func start(name: String?, label: String?, maxDurationNs: Nanos?, preRollNs: Nanos? = nil, askedAt: Nanos? = nil, id: Int?, requestedAt: Nanos) -> Reply {
        lifecycle.lock(); defer { lifecycle.unlock() }
        if let refusal = changeLifecycle({ $0.startAsked() }) { return failure(id, refusal) }
        var config = self.config  // one configuration for the whole recording
        config.cameraControls += standbyControls.forCamera(config, logger: logger)
        // The same rules as the wire parser (callers in-process skip the wire).
        if let label, let problem = Wire.labelProblem(label) { return startRefused(.badRequest(problem), id: id) }
        if let maxDurationNs {
            if let problem = Wire.maxDurationProblem(maxDurationNs) { return startRefused(.badRequest(problem), id: id) }
            config.maxDuration = maxDurationNs == 0 ? nil : maxDurationNs  // this recording's cap overrides max_duration
        }
        // This recording's pre-roll: the configured one, or less; more than standby keeps is refused.
        let wantPreRoll: Nanos
        switch PreRoll(config.preRoll).forStart(preRollNs) {
        case let .success(w): wantPreRoll = w
        case let .failure(r): return startRefused(.badRequest(r.message), id: id)
        }
        let paths: (part: String, final: String)
        switch outputPaths(name: name, dir: config.outputDir, outbox: config.outboxDir.map(Outbox.init(path:))) {
        case let .success(p): paths = p
        case let .failure(e): return startRefused(e, id: id)
        }
        if config.minFreeBytes > 0, let free = Storage.freeBytes(config.outputDir), free < config.minFreeBytes {
            return startFailed("cannot start recording: only \(Storage.megabytes(free)) free in \(config.outputDir), below min_free_mb \(config.minFreeBytes / 1_000_000) (free some space, or lower min_free_mb)", id: id)
        }
        // The devices: warm ones (standby) from the start instant on (the pre-roll before the
        // request, as much as they hold), else opened now.
        var live: LiveSources?
        let warm: Bool
        var startAt = requestedAt, preRollGot: Nanos = 0
        switch standby.borrow(until: SystemClock.now() + 5 * nanosPerSecond) {
        case let .success(s)?:
            live = s; warm = true
            // From the instant the user asked (a button's event), when the request says it.
            (startAt, preRollGot) = s.arm(requestedAt: PreRoll.askedAt(requestedAt: requestedAt, at: askedAt), preRoll: wantPreRoll)
            if preRollGot < wantPreRoll {
                logger.notice("pre-roll: \(PreRoll.seconds(preRollGot)) s of the \(PreRoll.seconds(wantPreRoll)) s asked (the devices opened, or the last recording ended, \(PreRoll.seconds(preRollGot)) s before the start)")
            }
        case let .failure(why)?:
            return startFailed("cannot start recording: \(why)", id: id)
        case nil: warm = false
        }
        do {
            if live == nil { live = try LiveSources.open(config, logger: logger, feed: liveFeed) }
            let s: RecordingSession
            do {
                s = try RecordingSession(config: config, partPath: paths.part, finalPath: paths.final, logger: logger, health: health,
                                         label: label, sources: live)
            } catch {
                if let live { if warm { live.disarm(); standby.giveBack(live) } else { live.stop() } }
                throw error
            }
            let file = paths.part
            s.onNotice = { [events] notice in
                switch notice {
                case let .takeKept(t):
                    events.publish(ControlEvent(event: ControlEvent.Kind.takeKept, file: file, take: TakeInfo(t), at: SystemClock.now()))
                case let .capReached(cap):
                    events.publish(ControlEvent(event: ControlEvent.Kind.capReached, file: file, maxDurationNs: cap, at: SystemClock.now()))
                }
            }
            let (recording, steps) = changeLifecycle {
                defer { session = s }
                return $0.started(part: paths.part, final: paths.final, dir: config.outputDir, minFreeBytes: config.minFreeBytes,
                                       warm: warm, video: s.sourceDescriptions.video ?? "none", audio: s.sourceDescriptions.audio ?? "none")
            }
            s.start(requestedAt: warm ? startAt : nil)
            perform(steps, config: config)
            refreshFreeSpace()
            stateChanged(file: paths.part)
            // When the pipeline ends on its own (source failure, disk error), the session is cleared.
            NamedThread.start("reel-session") { [self] in
                let outcome = s.finished.wait(until: nil)!
                sessionEnded(s, id: recording.id, outcome)
            }
            var r = reply(id: id)
            r.file = paths.part
            r.startNs = startAt  // with standby the start cut (the pre-roll before the request); without, the devices open after it
            if warm { r.preRollNs = preRollGot }
            return r
        } catch {
            unlink(paths.part)
            return startFailed("cannot start recording \(paths.part): \(error)", id: id, journal: (paths.final, paths.part))
        }
    }

    /// A `start` that cannot be carried out as asked: answered with why, nothing reported.
    private func startRefused(_ e: ControlError, id: Int?) -> Reply {
        failure(id, changeLifecycle { $0.startRefused(e) })
    }

    /// A `start` that failed: logged, kept as `lastError`, counted, published as an `error` event, answered.
    private func startFailed(_ msg: String, id: Int?, journal: (file: String, part: String)? = nil) -> Reply {
        let (steps, answer) = changeLifecycle { $0.startFailed(msg, journal: journal) }
        perform(steps, config: config)
        return failure(id, answer)
    }

    /// What a client's deadline keeps back for the reply's way to it.
    static let replyMarginNs: Nanos = 250_000_000

    func control(_ r: Timeline.Request, label: String? = nil, id: Int?, deadline: Nanos? = nil) -> Reply {
        guard let s = monitor.withLock({ session }) else {
            return failure(id, .wrongState("cannot \(r): not recording (state is idle; run 'reelctl start' first)"))
        }
        // A resume begins the segment after those recorded so far.
        let nextSegment = s.snapshot.segmentDurations.count
        if let label, let problem = Wire.labelProblem(label) { return failure(id, .badRequest(problem)) }
        switch s.request(r, label: r == .resume ? label : nil, deadline: deadline) {
        case .ok:
            // The segment a pause ends is the open one (the snapshot counts it), a resume begins the next.
            logger.notice("\(r == .pause ? "paused" : "resumed"): \(s.partPath)",
                          metadata: RecordingLog.fields(r == .pause ? .paused : .resumed, file: s.finalPath, part: s.partPath,
                                                        segment: r == .pause ? max(0, nextSegment - 1) : nextSegment,
                                                        durationNs: s.snapshot.recordedNs))
            if r == .resume {
                let index = nextSegment
                events.publish(ControlEvent(event: ControlEvent.Kind.segment, file: s.partPath, segment: index, at: SystemClock.now()))
            }
            stateChanged(file: s.partPath)
            return reply(id: id)
        case let .refused(msg): return failure(id, .wrongState(msg))
        case let .failed(msg): return failure(id, .failed(msg))
        }
    }

    /// `undo`: the pipeline removes the last take (cutting the file back) before answering; with
    /// `expecting`, only if the last take is that one.
    func undo(expecting: Int?, id: Int?, deadline: Nanos? = nil) -> Reply {
        guard let s = monitor.withLock({ session }) else {
            return failure(id, .wrongState("cannot undo: not recording (state is idle; there is no take to remove)"))
        }
        if let expecting, let problem = Wire.takeProblem(expecting) { return failure(id, .badRequest(problem)) }
        switch s.undo(expecting: expecting, deadline: deadline) {
        case let .ok(number, label):
            let title = label ?? "Take \(number)"
            logger.notice("take \(number) undone (\(title)): \(s.partPath) continues after take \(number - 1)",
                          metadata: RecordingLog.fields(nil, file: s.finalPath, part: s.partPath))
            var e = ControlEvent(event: ControlEvent.Kind.takeUndone, file: s.partPath, at: SystemClock.now())
            e.take = number
            e.label = label
            e.title = title
            events.publish(e)
            stateChanged(file: s.partPath)
            return reply(id: id)
        case let .refused(msg): return failure(id, .wrongState(msg))
        case let .failed(msg): return failure(id, .failed(msg))
        }
    }


    /// How long a `stop` waits for the pipeline to finish the file before answering with an error.
    static let stopWaitNs: Nanos = 120 * nanosPerSecond

    func stop(id: Int?, deadline: Nanos) -> Reply {
        lifecycle.lock(); defer { lifecycle.unlock() }
        let (asked, current) = monitor.withLock { (machine.stopAsked(), session) }
        let recording: RecorderLifecycle.Recording
        switch asked {
        case let .success(r): recording = r
        case let .failure(e): return failure(id, e)
        }
        guard let s = current else { return failure(id, .failed("no session for recording \(recording.part) (a bug in reeld; see its log)")) }
        switch s.request(.stop, deadline: deadline) {
        case .ok: changeLifecycle { $0.stopAccepted(id: recording.id) }
        case let .refused(msg): return failure(id, .wrongState(msg))
        case let .failed(msg): return failure(id, .failed(msg))
        }
        stateChanged(file: s.partPath)
        let waitFrom = SystemClock.now()
        guard let outcome = s.finished.wait(until: deadline) else {
            return failure(id, RecorderLifecycle.stopTimedOut(part: s.partPath, asked: waitFrom, deadline: deadline))
        }
        sessionEnded(s, id: recording.id, outcome)
        switch RecorderLifecycle.stopAnswer(outcome, part: s.partPath) {
        case let .ok(file):
            var r = reply(id: id, finished: s)
            r.file = file
            return r
        case let .error(e): return failure(id, e)
        }
    }

    /// Recording `id` (session `s`) ended: the first call for it reports the outcome (the stop's,
    /// or the watcher thread's when the pipeline ended by itself); a later one does nothing.
    private func sessionEnded(_ s: RecordingSession, id: Int, _ outcome: RecordingOutcome) {
        let snap = s.snapshot
        let facts = RecorderLifecycle.EndFacts(
            handedOff: s.handedOff, leftover: [s.finalPath, s.partPath].first { FileManager.default.fileExists(atPath: $0) },
            segments: snap.segmentDurations.count, recordedNs: snap.recordedNs, frames: snap.frames, droppedFrames: snap.droppedFrames)
        var close: LiveSources?
        var standbyFailed = false
        let end: RecorderLifecycle.End? = changeLifecycle {
            guard let end = $0.ended(id: id, outcome, facts) else { return nil }
            // The devices: back to standby (kept warm), before `session` is cleared so that a
            // `start` that follows finds them warm; or closed (outside the lock, below).
            if let live = s.liveSources {
                if end.giveBack { standbyFailed = standby.giveBack(live) } else { close = live }
            }
            session = nil
            return end
        }
        guard let end else { return }
        refreshFreeSpace()
        perform(end.steps, config: s.config)
        stateChanged(file: nil)
        changeLifecycle { $0.reported() }
        close?.stop()
        if standbyFailed { standbyChanged() }
    }

    /// Performs the lifecycle's steps, in order (`config`: the recording's, for on_finish).
    func perform(_ steps: [RecorderLifecycle.Step], config: RecorderConfig) {
        for step in steps {
            switch step {
            case let .log(level, message, metadata): logger.log(level: level, "\(message)", metadata: metadata)
            case let .error(message, kind): emitError(message, kind)
            case let .finished(file): events.publish(ControlEvent(event: ControlEvent.Kind.finished, file: file, at: SystemClock.now()))
            case let .handOn(f):
                Handoff.handOn(f, recovered: false, hook: config.onFinish, timeoutNs: config.onFinishTimeoutNs,
                               outbox: config.outboxDir.map(Outbox.init(path:)), logger: logger, linkFailed: { [self] in emitError($0, .outbox) })
            case .stop:
                NamedThread.start("reel-low-space") { [self] in _ = stop(id: nil, deadline: SystemClock.now() + Self.stopWaitNs) }
            }
        }
    }

    /// NAME.mp4.part and NAME.mp4 in `dir`, for a NAME whose `.mp4` is not taken there nor in the
    /// outbox (a recording of that name still waiting for upload: its link would collide).
    private func outputPaths(name: String?, dir: String, outbox: Outbox?) -> Result<(part: String, final: String), ControlError> {
        var isDir: ObjCBool = false
        if !FileManager.default.fileExists(atPath: dir, isDirectory: &isDir) {
            do { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
            catch { return .failure(.failed("cannot create output directory \(dir): \(error.localizedDescription) (check --output-dir and permissions)")) }
        } else if !isDir.boolValue {
            return .failure(.failed("output directory \(dir) is not a directory (check --output-dir)"))
        }
        func exists(_ base: String) -> Bool {
            FileManager.default.fileExists(atPath: "\(dir)/\(base).mp4") || FileManager.default.fileExists(atPath: "\(dir)/\(base).mp4.part")
                || outbox?.holds("\(base).mp4") == true
        }
        var base: String
        if let name {
            // One rule for names, shared with the wire parser (callers in-process skip the wire).
            if let problem = Wire.nameProblem(name) { return .failure(.badRequest(problem)) }
            base = name.hasSuffix(".mp4") ? String(name.dropLast(4)) : name
            if exists(base) {
                let whereTaken = outbox?.holds("\(base).mp4") == true && !FileManager.default.fileExists(atPath: "\(dir)/\(base).mp4")
                    ? "\(outbox!.path)/\(base).mp4 (a recording of that name waiting for upload) already exists" : "\(dir)/\(base).mp4 already exists"
                return .failure(.failed("\(whereTaken): choose another --name (Reel never overwrites a recording)"))
            }
        } else {
            var t = time(nil)
            var tmv = tm()
            localtime_r(&t, &tmv)
            var buf = [CChar](repeating: 0, count: 32)
            strftime(&buf, buf.count, "reel-%Y%m%d-%H%M%S", &tmv)
            let stem = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            base = stem
            var k = 2
            while exists(base) { base = "\(stem)-\(k)"; k += 1 }
        }
        return .success(("\(dir)/\(base).mp4.part", "\(dir)/\(base).mp4"))
    }
}
