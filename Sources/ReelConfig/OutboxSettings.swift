import ReelStorage

extension DaemonSettings {
    /// `outbox_dir` and `keep_free_mb` for `reeld serve` (at start and at each SIGHUP): keep_free_mb
    /// needs an outbox; the outbox exists or is created, and is a writable directory on the file
    /// system of `outputDir` (`Outbox.problem`). Returns the outbox (nil: none) and the bytes to
    /// keep free (0: none); an error names the key, where it was set, both paths and the fix.
    public func outbox(outputDir: String) throws(ConfigError) -> (dir: String?, keepFreeBytes: Int64) {
        let s = values
        if s.keepFreeMB > 0, s.outboxDir == nil {
            throw error(.keepFreeMB, "keep_free_mb = \(s.keepFreeMB) needs outbox_dir: reeld deletes only recordings that have left the outbox (uploaded), so without one it could never tell which; set outbox_dir (e.g. /var/lib/reel/outbox) or keep_free_mb = 0")
        }
        guard let box = s.outboxDir else { return (nil, 0) }
        if let why = Outbox.problem(outbox: box, outputDir: outputDir) { throw error(.outboxDir, why) }
        return (box, Int64(s.keepFreeMB) * 1_000_000)
    }
}
