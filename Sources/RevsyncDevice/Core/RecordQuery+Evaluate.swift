import RevsyncWire

extension RecordQuery {
    /// The query run over records in memory, with SQLite's semantics.
    func evaluate(_ records: [DeviceRecord]) -> [DeviceRecord] {
        var matching = records.filter { record in conditions.allSatisfy { $0.matches(record) } }
        matching.sort { lhs, rhs in
            for key in order {
                let order = SQLiteOrder.compare(lhs.value(of: key.attribute), rhs.value(of: key.attribute))
                if order != 0 { return key.ascending ? order < 0 : order > 0 }
            }
            return lhs.id < rhs.id
        }
        if let limit { return Array(matching.prefix(max(0, limit))) }
        return matching
    }
}

extension RecordQuery.Condition {
    func matches(_ record: DeviceRecord) -> Bool {
        let actual = record.value(of: attribute)
        if value.isNull {
            switch comparison {
            case .equal: return actual.isNull
            case .notEqual: return !actual.isNull
            default: return false
            }
        }
        if actual.isNull { return false }
        let order = SQLiteOrder.compare(actual, value)
        switch comparison {
        case .equal: return order == 0
        case .notEqual: return order != 0
        case .less: return order < 0
        case .lessOrEqual: return order <= 0
        case .greater: return order > 0
        case .greaterOrEqual: return order >= 0
        }
    }
}

extension DeviceRecord {
    /// An attribute's value, with `id` and `revision` as pseudo-attributes.
    func value(of attribute: String) -> JSONValue {
        switch attribute {
        case "id": .integer(id)
        case "revision": .integer(revision)
        default: attributes[attribute] ?? .null
        }
    }
}

/// SQLite's order of values: null, numbers (booleans as 0 and 1), text by bytes.
enum SQLiteOrder {
    private enum Key {
        case null
        case number(Double, Int64?)
        case text([UInt8])
    }

    private static func key(_ value: JSONValue) -> Key {
        switch value {
        case .null, .unsupported: .null
        case .bool(let flag): .number(flag ? 1 : 0, flag ? 1 : 0)
        case .integer(let number): .number(Double(number), number)
        case .double(let number): .number(number, nil)
        case .string(let text): .text(Array(text.utf8))
        }
    }

    /// -1, 0 or 1.
    static func compare(_ lhs: JSONValue, _ rhs: JSONValue) -> Int {
        switch (key(lhs), key(rhs)) {
        case (.null, .null): return 0
        case (.null, _): return -1
        case (_, .null): return 1
        case (.number(let a, let exactA), .number(let b, let exactB)):
            if let exactA, let exactB { return exactA < exactB ? -1 : (exactA == exactB ? 0 : 1) }
            return a < b ? -1 : (a == b ? 0 : 1)
        case (.number, .text): return -1
        case (.text, .number): return 1
        case (.text(let a), .text(let b)):
            return a.lexicographicallyPrecedes(b) ? -1 : (a == b ? 0 : 1)
        }
    }
}
