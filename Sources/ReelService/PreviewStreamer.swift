import Logging
import ReelControl
import ReelCore
import ReelMedia
import ReelPipeline
import ReelSystem
import Synchronization

/// The live preview's thread (`reel-preview`): while at least one `preview` subscriber exists,
/// takes the frame copies the open sources make for snapshots (`LiveSources.previewFrame`, a
/// swap, no copy), asks `PreviewPlan` which subscribers take each and at which width, encodes it
/// once per width (`SnapshotEncoder`) and offers it to them (`LiveFeed`, latest wins). It is
/// never a capture or encoder thread: a slow encode here only skips frames. Without subscribers
/// it waits and nothing is copied or encoded. Where no camera is open it says why
/// (`preview_state`), once per change.
/// @unchecked Sendable: the loop's state is the thread's own; `stopped` is atomic and `idle` a Monitor.
final class PreviewStreamer: @unchecked Sendable {
    private let feed: LiveFeed
    /// The open sources (recording's or standby's), or why there are none.
    private let sources: @Sendable () -> (LiveSources?, String)
    private let logger: Logger
    private let stopped = Atomic<Bool>(false)
    private let idle = Monitor()

    /// JPEG quality of preview frames (snapshots use 90).
    static let quality = 80
    /// How long the thread waits for a frame, for subscribers, or for a camera before looking again.
    static let pollNs: Nanos = 200_000_000

    init(feed: LiveFeed, logger: Logger, sources: @escaping @Sendable () -> (LiveSources?, String)) {
        self.feed = feed
        self.logger = logger
        self.sources = sources
    }

    func start() { NamedThread.start("reel-preview") { [self] in run() } }

    func stop() {
        stopped.store(true, ordering: .releasing)
        idle.withLock { idle.broadcast() }
    }

    private func run() {
        var plan = PreviewPlan()
        var buffer: [UInt8] = []
        var current: LiveSources?
        var seen = 0
        while !stopped.load(ordering: .acquiring) {
            let subscribers = feed.waitForPreview(until: SystemClock.now() + Self.pollNs)
            plan.sync(subscribers)
            if plan.isEmpty {
                current?.endPreview()
                current = nil
                buffer = []
                continue
            }
            let (live, why) = sources()
            if live !== current {
                current?.endPreview()
                current = live
                seen = 0
            }
            guard let live, let format = live.videoFormat else {
                feed.setPreviewLive(false, reason: live == nil ? why : "the open sources have no camera (video = \"none\")")
                idle.withLock { _ = idle.wait(until: SystemClock.now() + Self.pollNs) }
                continue
            }
            if let failure = live.failure {
                feed.setPreviewLive(false, reason: "the camera failed: \(failure)")
                idle.withLock { _ = idle.wait(until: SystemClock.now() + Self.pollNs) }
                continue
            }
            guard let frame = live.previewFrame(after: seen, from: plan.nextUseful, into: &buffer, until: SystemClock.now() + Self.pollNs) else {
                continue
            }
            seen = frame.number
            feed.setPreviewLive(true, reason: nil)
            let camera = PreviewCamera(width: format.width, height: format.height, fps: format.fps)
            for group in plan.frame(capturedAt: frame.time, camera: camera) {
                do {
                    let jpeg = try buffer.withUnsafeBytes {
                        try SnapshotEncoder.encode($0, width: format.width, height: format.height, format: format.pixelFormat,
                                                   targetWidth: group.width, quality: Self.quality)
                    }
                    feed.publish(jpeg: jpeg.jpeg, width: jpeg.width, height: jpeg.height, capturedNs: frame.time, to: group.ids)
                } catch {
                    logger.error("preview: cannot encode a \(format.width)x\(format.height) frame at width \(group.width): \(error)")
                    feed.setPreviewLive(false, reason: "reeld cannot encode preview frames: \(error)")
                }
            }
        }
        current?.endPreview()
    }
}
