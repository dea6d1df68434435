/// The readers for what sync requests and answers share: change sets, their entities'
/// changes and attribute values. Each gives what `JSONDecoder` decodes from the same bytes, or
/// nil when the bytes are outside the shape (or invalid): a key twice in one object, an
/// attribute value that is an array or an object, a key the type does not have.
extension JSONCursor {
    mutating func changeSets() -> [ChangeSet]? {
        var sets: [ChangeSet] = []
        let read = array { cursor in
            guard let changeSet = cursor.changeSet() else { return false }
            sets.append(changeSet)
            return true
        }
        return read ? sets : nil
    }

    mutating func changeSet() -> ChangeSet? {
        var changeSet = ChangeSet()
        var seen = SeenKeys()
        let read = object { cursor, key in
            switch key {
            case "seq":
                guard seen.first(0) else { return false }
                return cursor.optional(&changeSet.seq) { $0.integer() }
            case "revision":
                guard seen.first(1) else { return false }
                return cursor.optional(&changeSet.revision) { $0.integer() }
            case "conflict":
                guard seen.first(2) else { return false }
                return cursor.optional(&changeSet.conflict) { $0.bool() }
            case "resync":
                guard seen.first(3) else { return false }
                return cursor.optional(&changeSet.resync) { $0.bool() }
            case "reason":
                guard seen.first(4) else { return false }
                return cursor.optional(&changeSet.reason) { $0.reason() }
            case "types":
                guard seen.first(5) else { return false }
                if cursor.null() { return true }
                return cursor.array { cursor in
                    guard let name = cursor.string() else { return false }
                    changeSet.types.append(name)
                    return true
                }
            default:
                guard changeSet.entities[key] == nil, let changes = cursor.entityChanges() else { return false }
                changeSet.entities[key] = changes
                return true
            }
        }
        // The decoder's rules: each listed entity once, with its object, and no object unlisted.
        guard read, Set(changeSet.types).count == changeSet.types.count,
            changeSet.entities.count == changeSet.types.count,
            changeSet.types.allSatisfy({ changeSet.entities[$0] != nil })
        else { return nil }
        return changeSet
    }

    mutating func entityChanges() -> EntityChanges? {
        var changes = EntityChanges()
        var seen = SeenKeys()
        let read = object { cursor, key in
            switch key {
            case "create": return seen.first(0) && cursor.integers(into: &changes.create)
            case "update": return seen.first(1) && cursor.integers(into: &changes.update)
            case "delete": return seen.first(2) && cursor.integers(into: &changes.delete)
            case "attributes":
                guard seen.first(3) else { return false }
                return cursor.object { cursor, key in
                    // Only the canonical decimal form, as the decoder requires.
                    guard let id = Int64(key), String(id) == key, changes.attributes[id] == nil,
                        let values = cursor.attributes()
                    else { return false }
                    changes.attributes[id] = values
                    return true
                }
            default:
                return false
            }
        }
        return read ? changes : nil
    }

    /// An array of integers, or null for none.
    mutating func integers(into list: inout [Int64]) -> Bool {
        if null() { return true }
        return array { cursor in
            guard let value = cursor.integer() else { return false }
            list.append(value)
            return true
        }
    }

    mutating func attributes() -> Attributes? {
        var values: Attributes = [:]
        let read = object { cursor, name in
            guard values[name] == nil, let value = cursor.scalar() else { return false }
            values[name] = value
            return true
        }
        return read ? values : nil
    }

    /// An attribute value as `JSONValue` decodes it; nil for arrays and objects.
    mutating func scalar() -> JSONValue? {
        switch peek() {
        case UInt8(ascii: "\""): return string().map { .string($0) }
        case UInt8(ascii: "n"): return null() ? .null : nil
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return bool().map { .bool($0) }
        default:
            let start = index
            if let value = integer() { return .integer(value) }
            index = start
            return otherNumber()
        }
    }

    /// A corrective set's reason: its code, entity, id and message.
    mutating func reason() -> ConflictReason? {
        var code: ConflictReason.Code?, entity: String?, id: Int64?, message: String?
        var seen = SeenKeys()
        let read = object { cursor, key in
            switch key {
            case "code":
                guard seen.first(0), let text = cursor.string() else { return false }
                code = ConflictReason.Code(rawValue: text)
                return code != nil
            case "entity":
                guard seen.first(1) else { return false }
                return cursor.optional(&entity) { $0.string() }
            case "id":
                guard seen.first(2) else { return false }
                return cursor.optional(&id) { $0.integer() }
            case "message":
                guard seen.first(3) else { return false }
                message = cursor.string()
                return message != nil
            default:
                return false
            }
        }
        guard read, let code, let message else { return nil }
        return ConflictReason(code: code, entity: entity, id: id, message: message)
    }

    /// `true` or `false`.
    mutating func bool() -> Bool? {
        if literal("true") { return true }
        if literal("false") { return false }
        return nil
    }

    /// A value that may be null (nil, as `decodeIfPresent` gives it), read by `value` otherwise.
    mutating func optional<Value>(_ target: inout Value?, _ value: (inout JSONCursor) -> Value?) -> Bool {
        if null() { return true }
        target = value(&self)
        return target != nil
    }
}

/// Which of an object's fixed keys were read, so that one given twice is refused.
struct SeenKeys {
    private var bits: UInt16 = 0

    /// Whether key number `key` comes for the first time, marking it seen.
    mutating func first(_ key: Int) -> Bool {
        let bit: UInt16 = 1 << key
        guard bits & bit == 0 else { return false }
        bits |= bit
        return true
    }
}
