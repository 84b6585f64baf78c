package import CFFmpeg

/// The channel layout Reel gives `n` captured channels: every channel a full-band one.
///
/// FFmpeg's default for 3 channels is 2.1, whose third channel is LFE: the AAC encoder codes it
/// as a low-frequency element, low-passed near 120 Hz, so a third microphone came back 10.7 dB
/// quieter on speech (Tests/e2e/test_file_sources.py). 3 channels are 3.0 here (front left,
/// right, centre: AAC's own 3-channel configuration). 1, 2, 4 and 5 are FFmpeg's defaults
/// (mono, stereo, 4.0, 5.0), none with an LFE. The `channels` setting stops at 5: FFmpeg's
/// layouts for 6 to 8 channels all carry an LFE, and the encoder's other ones lost a channel.
public enum ChannelLayout {
    /// The most channels that all stay full-band.
    public static let maxChannels = 5

    /// Sets `layout` for `channels` (1 ... maxChannels) channels.
    package static func set(_ layout: inout AVChannelLayout, channels: Int) {
        if channels == 3 {
            let mask = [AV_CHAN_FRONT_LEFT, AV_CHAN_FRONT_RIGHT, AV_CHAN_FRONT_CENTER]
                .reduce(UInt64(0)) { $0 | (UInt64(1) << UInt64($1.rawValue)) }
            // Cannot fail: a mask of three known channels.
            _ = av_channel_layout_from_mask(&layout, mask)
        } else {
            av_channel_layout_default(&layout, Int32(channels))
        }
    }
}
