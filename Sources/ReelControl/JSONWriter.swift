import ReelCore
/// Writes compact JSON with keys in a fixed, documented order (Foundation's JSONEncoder on
/// Linux orders keys by hash, which makes replies hard to read and to compare).
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    /// One entry per open container: true until its first element is written.
    private var empty: [Bool] = []
    /// A key was just written, so the next value needs no comma.
    private var afterKey = false

    mutating func object(_ body: (inout JSONWriter) throws -> Void) rethrows {
        beginObject()
        try body(&self)
        endObject()
    }

    mutating func array<S: Sequence>(_ items: S, _ body: (inout JSONWriter, S.Element) throws -> Void) rethrows {
        beginArray()
        for item in items { try body(&self, item) }
        endArray()
    }

    mutating func beginObject() { open(UInt8(ascii: "{")) }
    mutating func endObject() { close(UInt8(ascii: "}")) }
    mutating func beginArray() { open(UInt8(ascii: "[")) }
    mutating func endArray() { close(UInt8(ascii: "]")) }

    private mutating func open(_ bracket: UInt8) {
        beginValue()
        bytes.append(bracket)
        empty.append(true)
    }

    private mutating func close(_ bracket: UInt8) {
        empty.removeLast()
        bytes.append(bracket)
    }

    /// Writes `"name":` inside an object; the next value written is its value.
    mutating func key(_ name: String) {
        beginValue()
        escaped(name)
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    mutating func field(_ name: String, _ value: String?) {
        key(name)
        if let value { string(value) } else { raw("null") }
    }

    mutating func field(_ name: String, _ value: some BinaryInteger) {
        key(name)
        raw(String(value))
    }

    mutating func field<I: BinaryInteger>(_ name: String, _ value: I?) {
        key(name)
        raw(value.map { String($0) } ?? "null")
    }

    mutating func field(_ name: String, _ value: Bool) {
        key(name)
        raw(value ? "true" : "false")
    }

    /// A finite number as JSON (nil or non-finite: `null`).
    mutating func field(_ name: String, _ value: Double?) {
        key(name)
        number(value)
    }

    mutating func number(_ value: Double?) {
        if let value, value.isFinite { raw("\(value)") } else { raw("null") }
    }

    mutating func integer(_ value: some BinaryInteger) { raw(String(value)) }
    mutating func bool(_ value: Bool) { raw(value ? "true" : "false") }
    mutating func null() { raw("null") }

    mutating func string(_ value: String) {
        beginValue()
        escaped(value)
    }

    private mutating func raw(_ text: String) {
        beginValue()
        bytes.append(contentsOf: text.utf8)  // not `+= Array(...)`: no array allocated per number
    }

    private mutating func beginValue() {
        if afterKey {
            afterKey = false
            return
        }
        if let isEmpty = empty.last {
            if !isEmpty { bytes.append(UInt8(ascii: ",")) }
            empty[empty.count - 1] = false
        }
    }

    private mutating func escaped(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings (keys, paths) need no escape: appended whole rather than byte by byte.
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 == 0x7f }) {
            bytes.append(contentsOf: value.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for unit in value.utf8 {
            switch unit {
            case UInt8(ascii: "\""): bytes += Array(#"\""#.utf8)
            case UInt8(ascii: "\\"): bytes += Array(#"\\"#.utf8)
            case UInt8(ascii: "\n"): bytes += Array(#"\n"#.utf8)
            case UInt8(ascii: "\r"): bytes += Array(#"\r"#.utf8)
            case UInt8(ascii: "\t"): bytes += Array(#"\t"#.utf8)
            case 0..<0x20, 0x7f:
                let hex = Array("0123456789abcdef".utf8)
                bytes += Array(#"\u00"#.utf8) + [hex[Int(unit >> 4)], hex[Int(unit & 0xf)]]
            default: bytes.append(unit)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// The protocol's types, written in the order docs/PROTOCOL.md shows.
protocol OrderedJSON {
    func write(to json: inout JSONWriter) throws
}

extension OrderedJSON where Self: Encodable {
    /// By default a type is written by its `encode(to:)`, keys in the order it gives them.
    func write(to json: inout JSONWriter) throws { try json.encode(self) }
}

extension Request: OrderedJSON {
    func write(to json: inout JSONWriter) {
        json.object { o in
            o.field("v", v)
            if let id { o.field("id", id) }
            o.field("cmd", cmd.rawValue)
            if let name { o.field("name", name) }
            if let label { o.field("label", label) }
            if let maxDurationNs { o.field("maxDurationNs", maxDurationNs) }
            if let preRollNs { o.field("preRollNs", preRollNs) }
            if let atNs { o.field("atNs", atNs) }
            if let width { o.field("width", width) }
            if let fps { o.field("fps", fps) }
            if let take { o.field("take", take) }
            if let timeoutMs { o.field("timeoutMs", timeoutMs) }
            switch reset {
            case .all?: o.field("reset", true)
            case let .only(names)?:
                o.key("reset")
                o.array(names) { $0.string($1) }
            case nil: break
            }
            if let args {
                o.key("args")
                o.object { a in
                    for (k, v) in args.sorted(by: { $0.key < $1.key }) {
                        switch v {
                        case let .int(i): a.field(k, i)
                        case let .bool(b): a.field(k, b)
                        case let .text(t): a.field(k, t)
                        }
                    }
                }
            }
        }
    }
}

extension ControlError: OrderedJSON {
    func write(to json: inout JSONWriter) {
        json.object { o in
            o.field("code", code)
            o.field("message", message)
        }
    }
}

// Written from their declarations (synthesized `encode(to:)`, through `JSONWriterEncoder`).
extension SegmentInfo: OrderedJSON {}
extension TakeInfo: OrderedJSON {}
extension StatusInfo: OrderedJSON {}

extension Reply: OrderedJSON {
    func write(to json: inout JSONWriter) throws {
        try json.object { o in
            o.field("v", v)
            if let id { o.field("id", id) }
            o.field("ok", ok)
            if let file { o.field("file", file) }
            if let status {
                o.key("status")
                try status.write(to: &o)
            }
            if let devices {
                o.key("devices")
                devices.write(to: &o)
            }
            if let subscribed { o.field("subscribed", subscribed) }
            if let controls {
                o.key("controls")
                o.array(controls) { a, c in c.write(to: &a) }
            }
            if let takes {
                o.key("takes")
                try o.array(takes) { a, t in try t.write(to: &a) }
            }
            if let startNs { o.field("startNs", startNs) }
            if let preRollNs { o.field("preRollNs", preRollNs) }
            if let snapshot {
                o.key("snapshot")
                o.object { s in
                    s.field("width", snapshot.width)
                    s.field("height", snapshot.height)
                    s.field("capturedNs", snapshot.capturedNs)
                    s.field("bytes", snapshot.bytes)
                    s.field("jpeg", snapshot.jpeg)
                }
            }
            if let preview {
                o.key("preview")
                o.object { p in
                    p.field("width", preview.width)
                    p.field("height", preview.height)
                    p.field("fps", preview.fps)
                }
            }
            if let error {
                o.key("error")
                error.write(to: &o)
            }
        }
    }
}

extension ControlEvent: OrderedJSON {
    func write(to json: inout JSONWriter) {
        json.object { o in
            o.field("v", v)
            o.field("event", event)
            if let state { o.field("state", state.rawValue) }
            if event != Kind.overflow { o.field("file", file) }
            if let segment { o.field("segment", segment) }
            if let message { o.field("message", message) }
            if let take {
                o.field("take", take)
                o.field("label", label)
                o.field("title", title)
                o.field("startNs", startNs)
                o.field("durationNs", durationNs)
            }
            if let maxDurationNs { o.field("maxDurationNs", maxDurationNs) }
            o.field("at", at)
        }
    }
}

extension DeviceList: OrderedJSON {
    func write(to json: inout JSONWriter) {
        json.object { o in
            o.key("video")
            o.array(video) { a, d in
                a.object { o in
                    o.field("path", d.path)
                    o.field("name", d.name)
                    o.field("driver", d.driver)
                    o.field("bus", d.bus)
                    o.key("formats")
                    o.array(d.formats) { a, f in
                        a.object { o in
                            o.field("fourcc", f.fourcc)
                            o.field("pixelFormat", f.pixelFormat)
                            o.field("description", f.description)
                            o.key("sizes")
                            o.array(f.sizes) { a, s in
                                a.object { o in
                                    o.field("width", s.width)
                                    o.field("height", s.height)
                                    o.key("fps")
                                    o.array(s.fps) { a, r in a.string(r) }
                                }
                            }
                        }
                    }
                    o.field("error", d.error)
                }
            }
            o.key("audio")
            o.array(audio) { a, d in
                a.object { o in
                    o.field("device", d.device)
                    o.field("card", d.card)
                    o.field("pcm", d.pcm)
                    o.field("cardName", d.cardName)
                    o.field("name", d.name)
                    o.field("offer", d.offer)
                }
            }
        }
    }
}

extension CameraControlInfo: OrderedJSON {
    func write(to json: inout JSONWriter) {
        json.object { o in
            o.field("name", name)
            o.field("label", label)
            o.field("id", id)
            o.field("type", type.rawValue)
            o.field("min", min)
            o.field("max", max)
            o.field("step", step)
            o.field("default", defaultValue)
            o.field("value", value)
            if type == .string { o.field("text", text) }
            o.key("menu")
            o.array(menu) { a, m in
                a.object { o in
                    o.field("index", m.index)
                    o.field("name", m.name)
                }
            }
            o.key("flags")
            o.array(flags) { a, f in a.string(f) }
        }
    }
}
