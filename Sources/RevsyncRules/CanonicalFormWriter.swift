import RevsyncWire

/// Writes a canonical change set byte for byte as `JSONEncoder` with `.sortedKeys` wrote it on
/// Linux, where every stored seq digest was made (swift-foundation's `JSONWriter`): keys in
/// the order of their UTF-8 bytes, `/` escaped as `\/`, `\b \f \n \r \t`, other control
/// characters as `\u00xx` in lower case, everything else as it is. The encoder took about 6 %
/// of the server's CPU with 32 writers (its generic containers); this is a loop over the bytes.
///
/// Change sets it is not sure of give nil and stay with the encoder: a number with a fraction
/// (the encoder's own formatting), an entity listed twice or named like a key of the change
/// set itself. `CanonicalFormWriterTests` compares the two on many change sets.
enum CanonicalFormWriter {
    static func bytes(_ changeSet: ChangeSet) -> [UInt8]? {
        guard changeSet.seq == nil, changeSet.conflict == nil, changeSet.revision == nil, changeSet.reason == nil, changeSet.resync == nil,
            Set(changeSet.types).count == changeSet.types.count,
            !changeSet.types.contains(where: ChangeSet.reservedKeys.contains)
        else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out.append(UInt8(ascii: "{"))
        for (index, key) in sorted(changeSet.types + ["types"]).enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            string(key, into: &out)
            out.append(UInt8(ascii: ":"))
            if key == "types" {
                out.append(UInt8(ascii: "["))
                for (index, name) in changeSet.types.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    string(name, into: &out)
                }
                out.append(UInt8(ascii: "]"))
            } else if !entity(changeSet.entities[key] ?? EntityChanges(), into: &out) {
                return nil
            }
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Its keys are in byte order already: attributes, create, delete, update.
    private static func entity(_ changes: EntityChanges, into out: inout [UInt8]) -> Bool {
        out.append(contentsOf: #"{"attributes":{"#.utf8)
        let ids = changes.attributes.keys.map { (id: $0, key: String($0)) }.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        for (index, id) in ids.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            string(id.key, into: &out)
            out.append(contentsOf: ":{".utf8)
            let values = changes.attributes[id.id] ?? [:]
            for (index, name) in sorted(Array(values.keys)).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                string(name, into: &out)
                out.append(UInt8(ascii: ":"))
                guard let value = values[name], scalar(value, into: &out) else { return false }
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: #"},"create":"#.utf8)
        integers(changes.create, into: &out)
        out.append(contentsOf: #","delete":"#.utf8)
        integers(changes.delete, into: &out)
        out.append(contentsOf: #","update":"#.utf8)
        integers(changes.update, into: &out)
        out.append(UInt8(ascii: "}"))
        return true
    }

    /// In the order of their UTF-8 bytes, as the encoder sorts keys.
    private static func sorted(_ keys: [String]) -> [String] {
        keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    private static func integers(_ values: [Int64], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: String(value).utf8)
        }
        out.append(UInt8(ascii: "]"))
    }

    private static func scalar(_ value: JSONValue, into out: inout [UInt8]) -> Bool {
        switch value {
        case .null, .unsupported: out.append(contentsOf: "null".utf8)
        case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
        case .integer(let number): out.append(contentsOf: String(number).utf8)
        case .string(let text): string(text, into: &out)
        case .double: return false
        }
        return true
    }

    private static func string(_ text: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case UInt8(ascii: "/"): out.append(contentsOf: [0x5C, UInt8(ascii: "/")])
            case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default:
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
