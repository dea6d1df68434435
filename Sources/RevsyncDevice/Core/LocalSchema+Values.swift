import RevsyncRules
import RevsyncWire

extension LocalSchema {
    /// Checks and canonicalizes a value an app writes, by the server's rule
    /// (`AttributeDescription.checked`), so that a bad value fails here and not as a rejected change set.
    func validated(_ value: JSONValue, for attribute: AttributeDescription, of entity: String) throws(DeviceError) -> JSONValue {
        do {
            return try attribute.checked(value)
        } catch {
            throw .invalidValue(entity: entity, attribute: attribute.name, message: error.message)
        }
    }

    /// A value from the server or the outbox, as the store keeps it: numbers are
    /// normalized to the attribute's type, everything else is kept.
    func stored(_ value: JSONValue, for attribute: AttributeDescription) -> JSONValue {
        switch (attribute.type, value) {
        case (.double, .integer(let number)): .double(Double(number))
        case (.integer, .double(let number)) where number.rounded() == number && abs(number) < 9.0e18: .integer(Int64(number))
        case (_, .unsupported): .null
        default: value
        }
    }

    /// `values` restricted to the entity's attributes (bookkeeping keys and unknown
    /// names dropped), normalized for storage.
    func storedAttributes(_ values: Attributes, of entity: String) -> Attributes {
        var result: Attributes = [:]
        for (name, value) in values {
            guard let attribute = attribute(entity, name) else { continue }
            result[name] = stored(value, for: attribute)
        }
        return result
    }

    /// A complete record: `values` over `base`, every other attribute null.
    func completeAttributes(_ values: Attributes, of entity: String, over base: Attributes = [:]) -> Attributes {
        var result: Attributes = [:]
        for attribute in entityIfKnown(entity)?.attributes ?? [] {
            result[attribute.name] = values[attribute.name].map { stored($0, for: attribute) } ?? base[attribute.name] ?? .null
        }
        return result
    }

    /// Entity and attribute names in `response` this schema does not know.
    public func unknownNames(in response: SyncResponse) -> [String] {
        var unknown: Set<String> = []
        for changeSet in response.changeSets {
            for name in changeSet.types {
                guard entityIfKnown(name) != nil else {
                    unknown.insert(name)
                    continue
                }
                for values in (changeSet.entities[name]?.attributes ?? [:]).values {
                    for key in values.keys where key != ReservedAttribute.revision && key != ReservedAttribute.oldId {
                        if attribute(name, key) == nil { unknown.insert("\(name).\(key)") }
                    }
                }
            }
        }
        return unknown.sorted()
    }
}
