/// What `reelctl set` changed since start-up, and the camera it was set on: applied after the
/// config's `[camera.controls]` at every open of that camera, never to another one.
///
/// The rules:
/// - A `set` that succeeded on camera C records its assignments for C: each replaces the same
///   control's earlier one (later wins; buttons are not kept, the caller leaves them out). Set
///   on another camera than the recorded ones were, those are dropped first.
/// - At an open, the camera is identified again (`forCamera`): the same camera gets the
///   assignments; a different one drops them all (they were meant for the other); one that
///   cannot be identified keeps them unapplied-to-nothing-else (nil: kept as they are).
/// - `reset` clears them: all, or the named controls.
public struct CameraOverrides: Equatable, Sendable {
    /// Who the camera is (V4L2 driver, card and bus, as QUERYCAP says): the one they were set on.
    public private(set) var camera: String?
    public private(set) var assignments: [CameraControlAssignment] = []

    public init() {}

    /// `set` succeeded on `camera` with `set`. Returns the controls dropped because they had
    /// been set on another camera.
    @discardableResult
    public mutating func record(_ set: [CameraControlAssignment], on camera: String) -> [String] {
        let dropped = forCamera(camera).dropped
        self.camera = camera
        for a in set {
            assignments.removeAll { $0.name == a.name }
            assignments.append(a)
        }
        return dropped
    }

    /// The assignments for the camera now at the path, identified as `camera` (nil: it could
    /// not be identified; the assignments stay, and are given). A different camera drops them:
    /// it gets none, and `dropped` names them.
    public mutating func forCamera(_ camera: String?) -> (assignments: [CameraControlAssignment], dropped: [String]) {
        guard let camera, let mine = self.camera, camera != mine else { return (assignments, []) }
        let dropped = assignments.map(\.name)
        assignments = []
        self.camera = nil
        return ([], dropped)
    }

    /// Clears the named overrides (nil: all). Returns the names removed and the names asked for
    /// that were not overridden.
    public mutating func reset(_ names: [String]?) -> (removed: [String], notSet: [String]) {
        guard let names else {
            defer { assignments = []; camera = nil }
            return (assignments.map(\.name), [])
        }
        let removed = assignments.map(\.name).filter(names.contains)
        assignments.removeAll { names.contains($0.name) }
        if assignments.isEmpty { camera = nil }
        return (removed, names.filter { !removed.contains($0) })
    }
}
