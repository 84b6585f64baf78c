/// reel-web's defaults that mirror reeld's (a unit test holds them equal to ReelConfig's, which
/// reel-web does not link: it would bring x264 and FFmpeg along).
public enum WebDefaults {
    /// reeld's default `output_dir`.
    public static let recordingsDir = "/var/lib/reel"
}
