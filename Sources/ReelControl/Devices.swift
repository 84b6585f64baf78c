import ReelCore

/// The capture devices present, as the `devices` reply carries them (docs/PROTOCOL.md).
public struct DeviceList: Codable, Sendable, Equatable {
    public var video: [VideoDeviceInfo]
    public var audio: [AudioDeviceInfo]
    public init(video: [VideoDeviceInfo], audio: [AudioDeviceInfo]) { self.video = video; self.audio = audio }
}

/// One V4L2 video capture node.
public struct VideoDeviceInfo: Codable, Sendable, Equatable {
    /// What to pass to `--video`, e.g. `/dev/video0`.
    public var path: String
    /// The card name, e.g. `vivid`.
    public var name: String
    public var driver: String
    public var bus: String
    public var formats: [VideoFormatInfo]
    /// Why the node could not be queried (busy, permission), or nil.
    public var error: String?
    public init(path: String, name: String, driver: String, bus: String, formats: [VideoFormatInfo], error: String? = nil) {
        self.path = path; self.name = name; self.driver = driver; self.bus = bus; self.formats = formats; self.error = error
    }
}

/// One pixel format of a camera with its sizes and frame rates.
public struct VideoFormatInfo: Codable, Sendable, Equatable {
    /// The V4L2 fourcc, e.g. `YUYV`.
    public var fourcc: String
    /// What to pass to `--pixel-format`, or nil when Reel cannot record this format.
    public var pixelFormat: String?
    public var description: String
    public var sizes: [VideoSizeInfo]
    public init(fourcc: String, pixelFormat: String?, description: String, sizes: [VideoSizeInfo]) {
        self.fourcc = fourcc; self.pixelFormat = pixelFormat; self.description = description; self.sizes = sizes
    }
}

/// One size (`--size`) with its frame rates (`--fps`): each `N` or `N/D`, or one `MIN-MAX` range.
public struct VideoSizeInfo: Codable, Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var fps: [String]
    public init(width: Int, height: Int, fps: [String]) { self.width = width; self.height = height; self.fps = fps }
}

/// One ALSA capture PCM.
public struct AudioDeviceInfo: Codable, Sendable, Equatable {
    /// What to pass to `--audio` after `alsa:`, e.g. `hw:Loopback,1` (`plughw:` converts rates).
    public var device: String
    public var card: Int
    public var pcm: Int
    public var cardName: String
    public var name: String
    /// What the hardware accepts, e.g. `S16_LE, S32_LE; 1-2 channels; 8000-48000 Hz`, or nil if busy.
    public var offer: String?
    public init(device: String, card: Int, pcm: Int, cardName: String, name: String, offer: String?) {
        self.device = device; self.card = card; self.pcm = pcm; self.cardName = cardName; self.name = name; self.offer = offer
    }
}

extension VideoFormatInfo {
    /// The protocol form of what a camera offers.
    public init(_ f: CameraFormat) {
        var sizes = f.sizes.map { s -> VideoSizeInfo in
            let fps: [String]
            switch s.rates {
            case let .discrete(list): fps = list.map(\.description)
            case let .range(lo, hi): fps = ["\(lo)-\(hi)"]
            }
            return VideoSizeInfo(width: s.width, height: s.height, fps: fps)
        }
        if let r = f.sizeRange {
            sizes.append(VideoSizeInfo(width: r.maxWidth, height: r.maxHeight, fps: []))
        }
        self.init(fourcc: fourCCString(f.fourcc), pixelFormat: f.reelName, description: f.description, sizes: sizes)
    }
}

/// The table `reelctl devices` and `reeld --list-devices` print.
public enum DevicesText {
    public static func render(_ list: DeviceList) -> String {
        var out = ""
        func table(_ rows: [[String]]) {
            guard let first = rows.first else { return }
            let widths = (0..<first.count).map { c in rows.map { $0[c].count }.max() ?? 0 }
            for r in rows {
                var line = ""
                for (c, cell) in r.enumerated() {
                    line += c == r.count - 1 ? cell : cell + String(repeating: " ", count: widths[c] - cell.count + 2)
                }
                out += line + "\n"
            }
        }
        out += "Video capture devices (--video PATH --pixel-format FORMAT --size WxH --fps N):\n"
        if list.video.isEmpty { out += "  none found (is the camera plugged in? is its driver loaded?)\n" }
        var rows: [[String]] = [["  DEVICE", "NAME", "FORMAT", "SIZE", "FPS"]]
        for d in list.video {
            if let e = d.error { rows.append(["  " + d.path, d.name, "-", "-", e]); continue }
            if d.formats.isEmpty { rows.append(["  " + d.path, d.name, "-", "-", "no capture formats"]) }
            for f in d.formats {
                guard let pf = f.pixelFormat else { continue }
                let fmt = "\(pf) (\(f.fourcc))"
                if f.sizes.isEmpty { rows.append(["  " + d.path, d.name, fmt, "-", "-"]) }
                for s in f.sizes {
                    rows.append(["  " + d.path, d.name, fmt, "\(s.width)x\(s.height)", s.fps.joined(separator: ", ")])
                }
            }
            let other = d.formats.filter { $0.pixelFormat == nil }.map(\.fourcc)
            if !other.isEmpty { rows.append(["  " + d.path, d.name, "unsupported", "-", other.joined(separator: " ")]) }
        }
        if rows.count > 1 { table(rows) }
        out += "Audio capture devices (--audio alsa:DEVICE; alsa:default and alsa:plughw:C,D also work):\n"
        if list.audio.isEmpty { out += "  none found (is the sound card's driver loaded?)\n" }
        var arows: [[String]] = [["  DEVICE", "CARD", "NAME", "OFFERS"]]
        for a in list.audio { arows.append(["  " + a.device, a.cardName, a.name, a.offer ?? "(busy)"]) }
        if arows.count > 1 { table(arows) }
        return out
    }
}
