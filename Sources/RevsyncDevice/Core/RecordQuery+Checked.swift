import RevsyncWire

extension RecordQuery {
    /// The query with its names checked against the schema and temporary ids in
    /// reference conditions replaced by their permanent ids when the server mapped them.
    func checked(for entity: String, schema: LocalSchema, store: any RecordStore) throws -> RecordQuery {
        _ = try schema.entity(entity)
        var copy = self
        for index in copy.conditions.indices {
            let name = copy.conditions[index].attribute
            guard let attribute = try Self.checkedAttribute(name, of: entity, schema: schema) else { continue }
            if let target = attribute.references, case .integer(let id) = copy.conditions[index].value, id < 0 {
                copy.conditions[index].value = .integer(try store.currentId(of: target, id))
            }
        }
        for key in copy.order { _ = try Self.checkedAttribute(key.attribute, of: entity, schema: schema) }
        return copy
    }

    /// The attribute named `name` (nil for `id` and `revision`), or an error when there is none.
    static func checkedAttribute(_ name: String, of entity: String, schema: LocalSchema) throws(DeviceError) -> AttributeDescription? {
        if name == "id" || name == "revision" { return nil }
        guard let attribute = schema.attribute(entity, name) else { throw .unknownAttribute(entity: entity, attribute: name) }
        return attribute
    }
}
