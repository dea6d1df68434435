import Foundation
import RevsyncWire

/// The bytes that identify a change set's content, for telling a true retry of a
/// `seq` from a different change set sent under the same `seq` (a device restored
/// from an older copy of itself).
///
/// A device rewrites the temporary ids of its pending change sets once it learns
/// their permanent ids, so the same change set may arrive with `-7` once and `42`
/// later. The canonical form therefore replaces every temporary id the device's
/// map resolves, in `update`, `delete`, their attribute keys and reference
/// attributes, exactly as the device would. Ids in `create` keep their temporary
/// ids (the device never rewrites those), and `seq` is left out: it is the key the
/// form is compared under.
public enum ChangeSetCanonicalForm {
    /// Negative ids `changeSet` uses outside `create` that are not created in it:
    /// the ones whose mapping the canonical form needs.
    public static func temporaryIdsToResolve(_ changeSet: ChangeSet, schema: DatasetSchema) -> Set<Int64> {
        let createdHere = Set(changeSet.entities.values.flatMap(\.create))
        var ids: Set<Int64> = []
        for name in changeSet.types {
            guard let changes = changeSet.entities[name] else { continue }
            ids.formUnion((changes.update + changes.delete).filter { $0 < 0 })
            for attribute in schema.entity(named: name)?.attributes ?? [] where attribute.references != nil {
                for values in changes.attributes.values {
                    if case .integer(let id)? = values[attribute.name], id < 0 { ids.insert(id) }
                }
            }
        }
        return ids.subtracting(createdHere)
    }

    /// The canonical bytes: sorted-key JSON of the change set with `permanentIds` substituted.
    public static func bytes(_ changeSet: ChangeSet, schema: DatasetSchema, permanentIds: [Int64: Int64]) -> [UInt8] {
        form(changeSet, schema: schema, permanentIds: permanentIds).bytes
    }

    /// The canonical bytes when no mapping could change them (no temporary id outside
    /// `create` that a map would be asked for), so that they can be made before the device's
    /// mappings are read; nil otherwise.
    public static func bytesWithoutMappings(_ changeSet: ChangeSet, schema: DatasetSchema) -> [UInt8]? {
        let (bytes, asked) = form(changeSet, schema: schema, permanentIds: [:])
        return asked ? nil : bytes
    }

    /// The bytes, and whether any id was looked up in `permanentIds` (found or not).
    private static func form(_ changeSet: ChangeSet, schema: DatasetSchema, permanentIds: [Int64: Int64]) -> (bytes: [UInt8], asked: Bool) {
        let createdHere = Set(changeSet.entities.values.flatMap(\.create))
        var asked = false
        func mapped(_ id: Int64) -> Int64 {
            guard id < 0 && !createdHere.contains(id) else { return id }
            asked = true
            return permanentIds[id] ?? id
        }
        var canonical = ChangeSet(types: changeSet.types)
        for name in changeSet.types {
            guard var changes = changeSet.entities[name] else { continue }
            let references = (schema.entity(named: name)?.attributes ?? []).filter { $0.references != nil }.map(\.name)
            var attributes: [Int64: Attributes] = [:]
            for (id, given) in changes.attributes {
                var values = given
                for attribute in references {
                    if case .integer(let target)? = values[attribute] { values[attribute] = .integer(mapped(target)) }
                }
                attributes[changes.create.contains(id) ? id : mapped(id)] = values
            }
            changes.update = changes.update.map(mapped)
            changes.delete = changes.delete.map(mapped)
            changes.attributes = attributes
            canonical.entities[name] = changes
        }
        if let bytes = CanonicalFormWriter.bytes(canonical) { return (bytes, asked) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding values of the wire types cannot fail; an empty form would only make every repeat look different.
        return ((try? Array(encoder.encode(canonical))) ?? [], asked)
    }
}
