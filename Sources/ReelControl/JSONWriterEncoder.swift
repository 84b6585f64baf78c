/// An `Encoder` that streams a value's `encode(to:)` into a `JSONWriter`, so a type with synthesized
/// `Codable` (the status object) is written from its property declarations alone: keys in the order
/// its `encode(to:)` gives them (for a synthesized one, the declaration order) and every nil as an
/// explicit `null`, also the ones a synthesized `encode(to:)` hands to `encodeIfPresent`.
/// Streams, so containers must be used in order: a value's one container (asked for any number of
/// times), its keys or elements one after another; nested and super encoders are not supported.
final class JSONWriterEncoder: Encoder {
    var json: JSONWriter
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    /// The container the value being encoded opened, if any: the bracket to close when it is done.
    private var opened: Opened?

    private enum Opened { case object, array }

    init(_ json: JSONWriter) { self.json = json }

    /// Writes `value` as one JSON value.
    func write(_ value: some Encodable) throws {
        let outer = opened
        opened = nil
        let start = json.bytes.count
        try value.encode(to: self)
        switch opened {
        case .object?: json.endObject()
        case .array?: json.endArray()
        case nil:
            guard json.bytes.count > start else {
                throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription:
                    "\(type(of: value)).encode(to:) wrote nothing: it must write one value (or a container)"))
            }
        }
        opened = outer
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if opened == nil {
            json.beginObject()
            opened = .object
        }
        precondition(opened == .object, "JSONWriterEncoder: a value asked for both a keyed and an unkeyed container")
        return KeyedEncodingContainer(Keyed(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if opened == nil {
            json.beginArray()
            opened = .array
        }
        precondition(opened == .array, "JSONWriterEncoder: a value asked for both a keyed and an unkeyed container")
        return Values(encoder: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { Values(encoder: self) }

    static func unsupported(_ what: String) -> Never {
        preconditionFailure("JSONWriterEncoder streams and cannot give \(what): encode the nested part as its own Encodable value")
    }

    /// An object's container: each key then its value; nil (also through `encodeIfPresent`) as `null`.
    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let encoder: JSONWriterEncoder
        var codingPath: [any CodingKey] { [] }

        private func key(_ key: Key) -> Values {
            encoder.json.key(key.stringValue)
            return Values(encoder: encoder)
        }

        mutating func encodeNil(forKey k: Key) throws { var v = key(k); try v.encodeNil() }
        mutating func encode<T: Encodable>(_ value: T, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: Bool, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: String, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: Double, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: Float, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: Int, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: Int8, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: Int16, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: Int32, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: Int64, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: UInt, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: UInt8, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: UInt16, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: UInt32, forKey k: Key) throws { var v = key(k); try v.encode(value) }
        mutating func encode(_ value: UInt64, forKey k: Key) throws { var v = key(k); try v.encode(value) }

        // The defaults skip a nil; here it is written as `null` (each through its own overload: no generic detour).
        mutating func encodeIfPresent<T: Encodable>(_ v: T?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: Bool?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: String?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: Double?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: Float?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: Int?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: Int8?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: Int16?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: Int32?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: Int64?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: UInt?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: UInt8?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: UInt16?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: UInt32?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }
        mutating func encodeIfPresent(_ v: UInt64?, forKey k: Key) throws { if let v { try encode(v, forKey: k) } else { try encodeNil(forKey: k) } }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            JSONWriterEncoder.unsupported("a nested keyed container")
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            JSONWriterEncoder.unsupported("a nested unkeyed container")
        }
        mutating func superEncoder() -> any Encoder { JSONWriterEncoder.unsupported("a super encoder") }
        mutating func superEncoder(forKey key: Key) -> any Encoder { JSONWriterEncoder.unsupported("a super encoder") }
    }

    /// An array's elements, or (after a key, or at the top) one value: the same writes either way,
    /// as the writer puts in the commas.
    struct Values: UnkeyedEncodingContainer, SingleValueEncodingContainer {
        let encoder: JSONWriterEncoder
        var codingPath: [any CodingKey] { [] }
        private(set) var count = 0

        private mutating func scalar(_ write: (inout JSONWriter) -> Void) {
            count += 1
            write(&encoder.json)
        }

        mutating func encodeNil() throws { scalar { $0.null() } }
        mutating func encode<T: Encodable>(_ value: T) throws {
            count += 1
            try encoder.write(value)
        }
        mutating func encode(_ value: Bool) throws { scalar { $0.bool(value) } }
        mutating func encode(_ value: String) throws { scalar { $0.string(value) } }
        mutating func encode(_ value: Double) throws { scalar { $0.number(value) } }
        mutating func encode(_ value: Float) throws { scalar { $0.number(Double(value)) } }
        mutating func encode(_ value: Int) throws { scalar { $0.integer(value) } }
        mutating func encode(_ value: Int8) throws { scalar { $0.integer(value) } }
        mutating func encode(_ value: Int16) throws { scalar { $0.integer(value) } }
        mutating func encode(_ value: Int32) throws { scalar { $0.integer(value) } }
        mutating func encode(_ value: Int64) throws { scalar { $0.integer(value) } }
        mutating func encode(_ value: UInt) throws { scalar { $0.integer(value) } }
        mutating func encode(_ value: UInt8) throws { scalar { $0.integer(value) } }
        mutating func encode(_ value: UInt16) throws { scalar { $0.integer(value) } }
        mutating func encode(_ value: UInt32) throws { scalar { $0.integer(value) } }
        mutating func encode(_ value: UInt64) throws { scalar { $0.integer(value) } }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            JSONWriterEncoder.unsupported("a nested keyed container")
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            JSONWriterEncoder.unsupported("a nested unkeyed container")
        }
        mutating func superEncoder() -> any Encoder { JSONWriterEncoder.unsupported("a super encoder") }
    }
}

extension JSONWriter {
    /// Writes `value` through its `Encodable` conformance (see `JSONWriterEncoder`).
    mutating func encode(_ value: some Encodable) throws {
        let encoder = JSONWriterEncoder(self)
        self = JSONWriter()  // the encoder's copy is then the only owner of the bytes: appending does not copy them
        defer { self = encoder.json }
        try encoder.write(value)
    }
}
