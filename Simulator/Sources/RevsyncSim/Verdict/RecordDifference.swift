import RevsyncDevice
import RevsyncWire

/// Where two lists of one entity's records first part ways, for a human.
public enum RecordDifference {
    /// The first record (by id) that differs between `left` and `right` or is
    /// missing on one side, described with both sides' canonical texts; nil when
    /// the lists hold the same records. The lists are sorted by id here.
    ///
    /// `screens 42 differs in name, revision: device {…}; PostgreSQL {…}` or
    /// `screens 42 is missing on device; PostgreSQL {…}`.
    public static func first(
        entity: String, attributes: [AttributeDescription],
        left: [DeviceRecord], named leftName: String, right: [DeviceRecord], named rightName: String
    ) -> String? {
        let left = left.sorted { $0.id < $1.id }
        let right = right.sorted { $0.id < $1.id }
        func text(_ record: DeviceRecord) -> String { CanonicalRecord.text(of: record, attributes: attributes) }
        var l = 0, r = 0
        while l < left.count || r < right.count {
            guard r < right.count else { return missing(left[l], on: rightName, present: leftName) }
            guard l < left.count else { return missing(right[r], on: leftName, present: rightName) }
            let (a, b) = (left[l], right[r])
            if a.id < b.id { return missing(a, on: rightName, present: leftName) }
            if b.id < a.id { return missing(b, on: leftName, present: rightName) }
            let (ta, tb) = (text(a), text(b))
            if ta != tb {
                let fields = differingFields(a, b, attributes: attributes).joined(separator: ", ")
                return "\(entity) \(a.id) differs in \(fields): \(leftName) \(ta); \(rightName) \(tb)"
            }
            l += 1
            r += 1
        }
        return nil

        func missing(_ record: DeviceRecord, on side: String, present other: String) -> String {
            "\(entity) \(record.id) is missing on \(side); \(other) \(text(record))"
        }
    }

    /// Names of the fields (`revision` and attributes) whose canonical values differ.
    static func differingFields(_ a: DeviceRecord, _ b: DeviceRecord, attributes: [AttributeDescription]) -> [String] {
        var names: [String] = a.revision == b.revision ? [] : [ReservedAttribute.revision]
        for attribute in attributes {
            let x = CanonicalRecord.value(a.attributes[attribute.name] ?? .null, as: attribute.type)
            let y = CanonicalRecord.value(b.attributes[attribute.name] ?? .null, as: attribute.type)
            if canonicalText(x) != canonicalText(y) { names.append(attribute.name) }
        }
        return names
    }

    private static func canonicalText(_ value: JSONValue) -> [UInt8] {
        var out = JSONWriter(capacity: 32)
        out.value(value)
        return out.bytes
    }
}
