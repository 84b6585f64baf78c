/// The live preview's decisions (`preview` on the control socket), as values on the caller's
/// clock: what a request may ask for (`PreviewGrant`), which captured frame goes to which
/// subscriber and at which width (`PreviewPlan`), and what a slow subscriber is sent
/// (`LatestSlot`). The threads that copy, encode and send frames only carry these out.

/// The bounds of a preview: the settings `preview_max_width` and `preview_max_fps`.
public struct PreviewLimits: Sendable, Equatable {
    public var maxWidth: Int
    public var maxFps: Int
    public static let minWidth = 16
    public static let defaultWidth = 640
    public static let defaultFps = 10
    /// At most this many preview subscribers at once (a further one is refused `busy`).
    public static let maxSubscribers = 8

    public init(maxWidth: Int = 1280, maxFps: Int = 15) {
        self.maxWidth = maxWidth
        self.maxFps = maxFps
    }
}

/// The camera a preview is taken from: its frames' size and rate.
public struct PreviewCamera: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var fps: Rational
    public init(width: Int, height: Int, fps: Rational) {
        self.width = width; self.height = height; self.fps = fps
    }
    /// Whole frames a second, at least 1 (30000/1001 gives 29).
    public var wholeFps: Int { max(1, Int(fps.num / max(1, fps.den))) }
}

/// Why a `preview` request is refused: names the limit and where it comes from.
public struct PreviewRefusal: Error, Equatable, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
}

/// What a `preview` request is given: the width and rate of its frames (height 0 while no camera is open).
public struct PreviewGrant: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var fps: Int
    public init(width: Int, height: Int, fps: Int) {
        self.width = width; self.height = height; self.fps = fps
    }

    /// The size a frame of `width`x`height` has at `target` columns: even, the height in
    /// proportion rounded to even; nil when `target` is below `PreviewLimits.minWidth` or above
    /// `width` (never enlarged). The one rule for snapshots and previews.
    public static func scaledSize(width: Int, height: Int, target: Int) -> (width: Int, height: Int)? {
        guard target >= PreviewLimits.minWidth, target <= width, width > 0 else { return nil }
        let w = target & ~1
        let h = max(2, Int((Int64(height) * Int64(w) + Int64(width) / 2) / Int64(width)) & ~1)
        return (w, h)
    }

    /// Checks a request's `width` and `fps` (nil: the defaults) against the limits and the open
    /// camera (nil: none open yet, so only the settings bound them). The error names the limit
    /// and where it comes from.
    public static func check(width: Int?, fps: Int?, camera: PreviewCamera?, limits: PreviewLimits) -> Result<PreviewGrant, PreviewRefusal> {
        var maxW = limits.maxWidth, maxWhy = "the setting preview_max_width"
        if let camera, camera.width < maxW { (maxW, maxWhy) = (camera.width, "the camera's width") }
        var maxF = limits.maxFps, maxFWhy = "the setting preview_max_fps"
        if let camera, camera.wholeFps < maxF { (maxF, maxFWhy) = (camera.wholeFps, "the camera's frame rate") }
        let w = width ?? min(PreviewLimits.defaultWidth, maxW)
        let f = fps ?? min(PreviewLimits.defaultFps, maxF)
        guard w >= PreviewLimits.minWidth, w <= maxW else {
            return .failure(PreviewRefusal("bad \"width\": \(w) is out of range \(PreviewLimits.minWidth) to \(maxW) (\(maxWhy); a preview is never enlarged)"))
        }
        guard f >= 1, f <= maxF else {
            return .failure(PreviewRefusal("bad \"fps\": \(f) is out of range 1 to \(maxF) (\(maxFWhy))"))
        }
        guard let camera, let size = scaledSize(width: camera.width, height: camera.height, target: w) else {
            return .success(PreviewGrant(width: w & ~1, height: 0, fps: f))
        }
        return .success(PreviewGrant(width: size.width, height: size.height, fps: f))
    }
}

/// Which frames each preview subscriber takes, and at which width they are encoded.
///
/// Rules:
/// - A subscriber at `fps` takes at most one frame per slot of 1/fps of capture time, on a grid
///   that starts at the first frame it takes: the first frame captured at or after half a camera
///   frame before each grid point. A camera at 30 fps gives a subscriber at 10 every third frame
///   and one at 15 every second; camera jitter under half a camera frame changes nothing.
/// - A gap (no frame for a whole slot or more: the camera stalled, or the preview was busy) loses
///   only the empty slots: the next frame is taken and the grid starts again there.
/// - Subscribers taking the same frame at the same width share one encoding (`frame` groups
///   them); the width is the asked one, at most the camera's (never enlarged).
public struct PreviewPlan: Sendable {
    struct Entry: Sendable {
        var width: Int
        var fps: Int
        /// The grid's origin (nil: the next frame starts it) and the last slot taken on it.
        var origin: Nanos?
        var lastSlot: Int64 = 0
    }
    private(set) var entries: [UInt64: Entry] = [:]
    /// Half the camera's frame interval (the jitter a grid point tolerates), from the last frame.
    private var tolerance: Nanos = 0

    public init() {}

    public var isEmpty: Bool { entries.isEmpty }

    /// Makes the plan's subscribers those given (id, width, fps): new ones start with the next
    /// frame, gone ones are forgotten, the others keep their grid.
    public mutating func sync(_ subscribers: [(id: UInt64, width: Int, fps: Int)]) {
        var next: [UInt64: Entry] = [:]
        for s in subscribers {
            if let e = entries[s.id], e.width == s.width, e.fps == s.fps { next[s.id] = e } else {
                next[s.id] = Entry(width: s.width, fps: max(1, s.fps))
            }
        }
        entries = next
    }

    /// The earliest capture time any subscriber would take a frame at (nil: any frame; a new
    /// subscriber). Frames captured before it need not be copied.
    public var nextUseful: Nanos? {
        var earliest: Nanos?
        for e in entries.values {
            guard let origin = e.origin else { return nil }
            let t = origin + rescale(e.lastSlot + 1, nanosPerSecond, Int64(e.fps), rounding: .down) - tolerance
            earliest = min(earliest ?? t, t)
        }
        return earliest
    }

    /// A frame captured at `t` by `camera`: the widths to encode it at, each with the
    /// subscribers taking it there (ids ascending, widths ascending).
    public mutating func frame(capturedAt t: Nanos, camera: PreviewCamera) -> [(width: Int, ids: [UInt64])] {
        tolerance = rescale(camera.fps.den, nanosPerSecond, 2 * max(1, camera.fps.num), rounding: .down)
        var byWidth: [Int: [UInt64]] = [:]
        for id in entries.keys.sorted() {
            var e = entries[id]!
            if let origin = e.origin {
                let s = rescale(t - origin + tolerance, Int64(e.fps), nanosPerSecond, rounding: .down)
                guard s > e.lastSlot else { continue }
                if s == e.lastSlot + 1 { e.lastSlot = s } else { (e.origin, e.lastSlot) = (t, 0) }  // after a gap: a new grid
            } else {
                (e.origin, e.lastSlot) = (t, 0)
            }
            entries[id] = e
            byWidth[min(e.width, camera.width) & ~1, default: []].append(id)
        }
        return byWidth.keys.sorted().map { ($0, byWidth[$0]!) }
    }
}

/// Latest wins: what waits for one slow reader. At most one item waits; a newer one replaces
/// it and counts as a drop, reported with the next item taken.
public struct LatestSlot<Item: Sendable>: Sendable {
    public private(set) var waiting: Item?
    /// Items replaced since the last `take`.
    public private(set) var dropped: Int = 0
    /// Items offered so far (taken, waiting or dropped): the last offered one's number.
    public private(set) var offered: Int64 = 0

    public init() {}

    public mutating func offer(_ item: Item) {
        if waiting != nil { dropped += 1 }
        waiting = item
        offered += 1
    }

    /// The waiting item, its number (`offered` when it came) and the drops before it; nil when none waits.
    public mutating func take() -> (item: Item, seq: Int64, dropped: Int)? {
        guard let item = waiting else { return nil }
        defer { waiting = nil; dropped = 0 }
        return (item, offered, dropped)
    }
}

/// Whether the preview is live, sent to subscribers once per change (`preview_state`). It starts
/// live: frames coming say so themselves, and `live: true` is only news after a `live: false`.
public struct PreviewLiveness: Sendable, Equatable {
    public private(set) var live = true
    public private(set) var reason: String?
    public init() {}

    /// The new state; true when it differs from the last (a line is due).
    public mutating func observe(live: Bool, reason: String?) -> Bool {
        let r = live ? nil : reason
        guard self.live != live || self.reason != r else { return false }
        self.live = live
        self.reason = r
        return true
    }
}
