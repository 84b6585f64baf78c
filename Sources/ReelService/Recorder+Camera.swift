import Foundation
import Logging
import ReelCapture
import ReelControl
import ReelCore
import ReelMedia
import ReelPipeline
import ReelSystem

/// `controls`, `set` and `snapshot`: on the recording's devices, the warm ones (standby), or a
/// brief open of the configured camera.
extension Recorder {
    // MARK: Camera controls

    /// The camera `controls`/`set` act on: the recording's when recording, else the configured
    /// one; or why there is none.
    private func cameraPath(_ config: RecorderConfig) -> Result<String, ControlError> {
        let need = "controls need a V4L2 camera (video = \"/dev/videoN\"; see 'reelctl devices')"
        switch config.video {
        case let .v4l2(device, _): return .success(device)
        case .test: return .failure(.failed("the test source has no controls; \(need)"))
        case let .y4m(path, _): return .failure(.failed("the video file y4m:\(path) has no controls; \(need)"))
        case .none: return .failure(.failed("there is no video source (video = \"none\"); \(need)"))
        }
    }

    /// `controls`: on the recording's open fd while recording, else by opening the camera briefly
    /// (after applying the config and earlier `set`s, as a recording would).
    func listControls(id: Int?) -> Reply {
        let (s, config) = monitor.withLock { (session, currentConfig) }
        if let list = (s?.camera ?? standby.warm?.camera)?.controls() { return controlsReply(id, list) }
        let overrides = standbyControls.forCamera(s?.config ?? config, logger: logger)
        let path: String
        switch cameraPath(s?.config ?? config) {
        case let .success(p): path = p
        case let .failure(e): return failure(id, e)
        }
        do {
            let (list, warning) = try CameraControlAccess.list(path: path, base: config.cameraControls + overrides)
            if let warning { logger.warning("camera controls from the config were not all applied (the next 'start' fails with this): \(warning)") }
            return controlsReply(id, list)
        } catch {
            return failure(id, .failed("cannot list the controls of camera \(path): \(error)"))
        }
    }

    /// `set`: checks every value against the camera's own description, then sets them all in one
    /// call, on the open fd while recording (the capture thread never waits), else by opening the
    /// camera briefly. What was set is kept and applied again at every later open.
    func setControls(_ args: [String: CameraControlInput], id: Int?) -> Reply {
        let assignments = args.sorted { $0.key < $1.key }.map { CameraControlAssignment(name: $0.key, input: $0.value, origin: "") }
        let (s, config) = monitor.withLock { (session, currentConfig) }
        let overrides = standbyControls.forCamera(s?.config ?? config, logger: logger)
        let set: [CameraControlInfo]
        do {
            if let live = try (s?.camera ?? standby.warm?.camera)?.setControls(assignments) {
                set = live
            } else {
                let path: String
                switch cameraPath(s?.config ?? config) {
                case let .success(p): path = p
                case let .failure(e): return failure(id, e)
                }
                set = try CameraControlAccess.set(path: path, base: config.cameraControls + overrides, assignments)
            }
        } catch {
            logger.warning("reelctl set: \(error)")
            return failure(id, .failed("\(error)"))
        }
        let kept = assignments.filter { a in set.contains { $0.name == a.name && $0.type != .button } }
        if case let .v4l2(device, _) = (s?.config ?? config).video {
            let camera = CameraControlAccess.identity(path: device) ?? device
            let dropped = standbyControls.withLock { $0.record(kept, on: camera) }
            if !dropped.isEmpty { logger.notice("camera controls set on \(camera): those set on the camera before are dropped (\(dropped.joined(separator: ", ")))") }
        }
        logger.notice("camera controls set: \(set.map { "\($0.name)=\($0.value.map($0.show) ?? "?")" }.joined(separator: " "))")
        return controlsReply(id, set)
    }

    /// `set --reset`: clears what earlier `set`s changed (all, or the named controls), so the
    /// next opens apply only the config's `[camera.controls]`; the camera, if it can be reached,
    /// goes back at once to those values, else to its defaults. Names not changed by `set` are
    /// refused, naming them, when none of the names was.
    func resetControls(_ reset: ControlReset, id: Int?) -> Reply {
        var names: [String]?
        if case let .only(n) = reset { names = n }
        let (removed, notSet) = standbyControls.withLock { $0.reset(names) }
        if removed.isEmpty, !notSet.isEmpty {
            return failure(id, .failed("nothing to reset: 'reelctl set' did not change \(notSet.joined(separator: ", ")) (see 'reelctl controls')"))
        }
        if !notSet.isEmpty { logger.info("reelctl set --reset: \(notSet.joined(separator: ", ")) had not been changed by 'reelctl set'") }
        guard !removed.isEmpty else { return controlsReply(id, []) }
        logger.notice("camera controls reset (no longer applied at each open): \(removed.joined(separator: " "))")
        let (s, config) = monitor.withLock { (session, currentConfig) }
        let base = (s?.config ?? config).cameraControls.filter { $0.origin != "" }  // the config's own, not earlier sets
        let live = s?.camera ?? standby.warm?.camera
        let path: String
        switch cameraPath(s?.config ?? config) {
        case let .success(p): path = p
        case .failure: return controlsReply(id, [])  // no camera to put back: the overrides are cleared
        }
        let remaining = standbyControls.withLock { $0.assignments }
        do {
            let info = try live?.controls() ?? CameraControlAccess.list(path: path, base: base + remaining).controls
            // Back to what an open sets: the config's value, else the camera's default.
            let restore = removed.compactMap { name -> CameraControlAssignment? in
                if let fromConfig = base.last(where: { $0.name == name }) { return fromConfig }
                guard let c = info.first(where: { $0.name == name }), c.type != .button, c.type != .string else { return nil }
                return CameraControlAssignment(name: name, input: .int(c.defaultValue), origin: "the camera's default")
            }
            guard !restore.isEmpty else { return controlsReply(id, []) }
            let set = try live?.setControls(restore) ?? CameraControlAccess.set(path: path, base: base + remaining, restore)
            return controlsReply(id, set)
        } catch {
            let msg = "the controls set earlier are cleared (not applied at the next open), but camera \(path) could not be put back to its values now: \(error)"
            logger.warning("reelctl set --reset: \(msg)")
            return failure(id, .failed(msg))
        }
    }

    // MARK: Snapshots

    /// How long a snapshot waits for the next frame of open devices, and for a brief open.
    static let snapshotWaitNs: Nanos = 2 * nanosPerSecond
    static let snapshotOpenWaitNs: Nanos = 5 * nanosPerSecond

    /// `snapshot`: a JPEG of the newest frame the camera delivered: from the recording's devices,
    /// the warm ones (standby), or a brief open of the configured camera. The image goes back in
    /// the reply, so any client allowed on the socket gets it, wherever reeld may write.
    func snapshot(width: Int?, id: Int?, requestedAt: Nanos) -> Reply {
        var open = monitor.withLock { session?.liveSources } ?? standby.warm
        var brief: LiveSources?
        if open == nil {
            // A brief open, serialised with start/stop so that it never races a recording's open.
            lifecycle.lock()
            defer { lifecycle.unlock() }
            open = monitor.withLock { session?.liveSources } ?? standby.warm
            if open == nil {
                var config = self.config
                config.cameraControls += standbyControls.forCamera(config, logger: logger)
                let camera = snapshotSource(config)
                guard camera.ok else { return failure(id, .failed(camera.why)) }
                do {
                    guard let s = try LiveSources.open(config, logger: logger, videoOnly: true) else {
                        return failure(id, .failed("cannot take a snapshot: \(config.videoDescription) is not a live source (snapshots need a camera or the test source)"))
                    }
                    brief = s
                    s.start()
                } catch {
                    return failure(id, .failed("cannot take a snapshot: \(error)"))
                }
                return snapshotReply(from: brief!, width: width, id: id, requestedAt: requestedAt, wait: Self.snapshotOpenWaitNs, closing: true)
            }
        }
        return snapshotReply(from: open!, width: width, id: id, requestedAt: requestedAt, wait: Self.snapshotWaitNs, closing: false)
    }

    /// Whether the configured video source can give a snapshot, or why not.
    private func snapshotSource(_ config: RecorderConfig) -> (ok: Bool, why: String) {
        switch config.video {
        case .v4l2, .test: return (true, "")
        case .none: return (false, "cannot take a snapshot: there is no video source (video = \"none\"; set a camera, see 'reelctl devices')")
        case let .y4m(path, _): return (false, "cannot take a snapshot: the video source is the file y4m:\(path) (snapshots need a camera or the test source)")
        }
    }

    private func snapshotReply(from live: LiveSources, width: Int?, id: Int?, requestedAt: Nanos, wait: Nanos, closing: Bool) -> Reply {
        defer { if closing { live.stop() } }
        guard let format = live.videoFormat else {
            return failure(id, .failed("cannot take a snapshot: there is no video source (video = \"none\"; set a camera, see 'reelctl devices')"))
        }
        if let width, SnapshotEncoder.scaledSize(width: format.width, height: format.height, target: width) == nil {
            return failure(id, .badRequest("bad \"width\": \(width) is out of range \(SnapshotEncoder.minWidth) to \(format.width) (the camera's width; a snapshot is never enlarged)"))
        }
        guard let frame = live.nextFrame(until: SystemClock.now() + wait) else {
            let why = live.failure.map { "the source failed: \($0)" } ?? "no frame within \(wait / nanosPerSecond) s"
            return failure(id, .failed("cannot take a snapshot from \(live.video?.description ?? "the camera"): \(why) (see 'reelctl status' and reeld's log)"))
        }
        do {
            let jpeg = try frame.bytes.withUnsafeBytes {
                try SnapshotEncoder.encode($0, width: format.width, height: format.height, format: format.pixelFormat, targetWidth: width)
            }
            guard jpeg.jpeg.count <= SnapshotInfo.maxBytes else {
                return failure(id, .failed("the snapshot is \(jpeg.jpeg.count) bytes, more than the \(SnapshotInfo.maxBytes) a reply carries (ask for a smaller --width)"))
            }
            var r = Reply(v: protocolVersion, id: id, ok: true)
            r.snapshot = SnapshotInfo(width: jpeg.width, height: jpeg.height, capturedNs: frame.time, jpeg: jpeg.jpeg)
            logger.info("snapshot: \(jpeg.width)x\(jpeg.height), \(jpeg.jpeg.count) bytes, captured \((frame.time - requestedAt) / 1_000_000) ms after the request, sent \((SystemClock.now() - requestedAt) / 1_000_000) ms after it")
            return r
        } catch {
            return failure(id, .failed("cannot take a snapshot: \(error)"))
        }
    }

    private func controlsReply(_ id: Int?, _ list: [CameraControlInfo]) -> Reply {
        var r = Reply(v: protocolVersion, id: id, ok: true)
        r.controls = list
        return r
    }
}
