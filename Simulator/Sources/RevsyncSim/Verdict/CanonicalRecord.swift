import RevsyncDevice
import RevsyncWire

/// One text per record that is the same however the record was obtained: read
/// from PostgreSQL, received over JSON, or stored in a device's SQLite file.
///
/// Values are normalized by the attribute's type first (JSON carries `2.0` as
/// `2`, which decodes as an integer; timestamps may arrive in any accepted
/// form), then written with the server's own `JSONWriter`, whose numbers are
/// the shortest form that reads back to the same double.
public enum CanonicalRecord {
    /// `{"id":5,"revision":12,"name":"Owls","city":null}`: id, revision, then every
    /// attribute in schema order (absent ones as null, names outside the schema ignored).
    public static func text(of record: DeviceRecord, attributes: [AttributeDescription]) -> String {
        var out = JSONWriter(capacity: 64 + 24 * attributes.count)
        write(record, attributes: attributes, to: &out)
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// Appends the canonical text of `record` to `out`.
    static func write(_ record: DeviceRecord, attributes: [AttributeDescription], to out: inout JSONWriter) {
        out.raw("{\"id\":")
        out.integer(record.id)
        out.raw(",\"revision\":")
        out.integer(record.revision)
        for attribute in attributes {
            out.byte(UInt8(ascii: ","))
            out.key(attribute.name)
            out.value(value(record.attributes[attribute.name] ?? .null, as: attribute.type))
        }
        out.byte(UInt8(ascii: "}"))
    }

    /// `value` as an attribute of `type` holds it: integers of double attributes as
    /// doubles, integral doubles of integer attributes as integers, timestamps in
    /// the server's canonical UTC text. Anything that does not fit is kept, so a
    /// wrong value still shows as a difference.
    public static func value(_ value: JSONValue, as type: AttributeType) -> JSONValue {
        switch (type, value) {
        case (.double, .integer(let number)):
            return .double(Double(number))
        case (.integer, .double(let number)) where number.rounded() == number && abs(number) < 9.0e18:
            return .integer(Int64(number))
        case (.timestamp, .string(let text)):
            return .string(Timestamp.canonical(text) ?? text)
        case (_, .unsupported):
            return .null
        default:
            return value
        }
    }
}
