import RevsyncRules
import RevsyncWire

/// Whether a log entry holds the change set a device sent: the pure comparison
/// behind "acknowledged content".
///
/// The entry must be the device's, under the same `seq`; it must create exactly
/// the temporary ids the device created (its `__oldId__`s), entity by entity;
/// every record the device updated or deleted must be updated or deleted there
/// (after mapping temporary ids; cascades may add more); and every attribute the
/// device sent must have the same value there (references mapped, values in
/// the attribute type's canonical form).
///
/// A device restored from an older copy of its file reuses `seq`s. A server that
/// answers such a `seq` with the outcome of the change set first sent under it
/// acknowledges the new edit with an entry holding the old one: this is what
/// catches it, where comparing (device, seq) pairs cannot.
public enum AcknowledgedContent {
    /// How many problems one mismatch lists.
    static let problemsShown = 3

    /// What differs; nil when the entry holds what the device sent.
    public static func difference(
        _ ack: AcknowledgedChangeSet, entry: LoggedChangeSet?, temporaryIds: [Int64: Int64], schema: DatasetSchema
    ) -> String? {
        guard let entry else { return "no log entry at revision \(ack.revision)" }
        guard entry.device == ack.device else {
            return "the log entry is device \(entry.device)'s (seq \(entry.seq.map(String.init) ?? "none"))"
        }
        guard entry.seq == ack.seq else { return "the log entry has seq \(entry.seq.map(String.init) ?? "none")" }

        let logged = entry.authorBody
        var created: [Int64: Int64] = [:]
        for changes in logged.entities.values {
            for id in changes.create {
                if let old = changes.attributes[id]?[ReservedAttribute.oldId]?.integerValue { created[old] = id }
            }
        }
        func permanent(_ id: Int64) -> Int64? { id >= 0 ? id : created[id] ?? temporaryIds[id] }

        var problems: [String] = []
        let sent = ack.sent
        for name in sent.types {
            guard let changes = sent.entities[name] else { continue }
            let loggedChanges = logged.entities[name] ?? EntityChanges()
            let attributes = schema.entity(named: name)?.attributes ?? []
            func compare(_ sentId: Int64, as id: Int64) {
                let mine = changes.attributes[sentId] ?? [:]
                let theirs = loggedChanges.attributes[id] ?? [:]
                if let problem = attributeDifference(mine, theirs, attributes: attributes, permanent: permanent) {
                    problems.append("\(name) \(id) (\(sentId)) \(problem)")
                }
            }

            let loggedOldIds = loggedChanges.create.compactMap { loggedChanges.attributes[$0]?[ReservedAttribute.oldId]?.integerValue }
            if Set(changes.create) != Set(loggedOldIds) || loggedOldIds.count != loggedChanges.create.count {
                problems.append("\(name): created temporary ids \(list(changes.create)) but the entry created \(list(loggedOldIds))"
                    + (loggedOldIds.count == loggedChanges.create.count ? "" : " and records without __oldId__"))
            } else {
                for temporaryId in changes.create {
                    if let id = created[temporaryId] { compare(temporaryId, as: id) }
                }
            }
            for sentId in changes.update {
                guard let id = permanent(sentId) else {
                    problems.append("\(name): updated temporary id \(sentId), which the server never mapped")
                    continue
                }
                guard loggedChanges.update.contains(id) else {
                    problems.append("\(name) \(id): updated by the device, not in the entry's updates")
                    continue
                }
                compare(sentId, as: id)
            }
            for sentId in changes.delete {
                guard let id = permanent(sentId) else {
                    problems.append("\(name): deleted temporary id \(sentId), which the server never mapped")
                    continue
                }
                if !loggedChanges.delete.contains(id) { problems.append("\(name) \(id): deleted by the device, not in the entry's deletes") }
            }
        }
        for name in logged.types where sent.entities[name] == nil {
            if let creates = logged.entities[name]?.create, !creates.isEmpty {
                problems.append("\(name): the entry created \(list(creates)), which the device did not send")
            }
        }
        guard !problems.isEmpty else { return nil }
        var text = problems.prefix(problemsShown).joined(separator: "; ")
        if problems.count > problemsShown { text += "; … \(problems.count - problemsShown) more" }
        return text
    }

    /// The first attribute the device sent that the entry holds otherwise.
    static func attributeDifference(
        _ sent: Attributes, _ logged: Attributes, attributes: [AttributeDescription], permanent: (Int64) -> Int64?
    ) -> String? {
        for attribute in attributes {
            guard let mine = sent[attribute.name] else { continue }
            guard let theirs = logged[attribute.name] else { return "\(attribute.name): sent \(show(mine)), absent from the entry" }
            let expected: JSONValue
            if attribute.references != nil, case .integer(let target) = mine {
                guard let id = permanent(target) else { return "\(attribute.name): references temporary id \(target), never mapped" }
                expected = .integer(id)
            } else {
                expected = CanonicalRecord.value(mine, as: attribute.type)
            }
            if expected != CanonicalRecord.value(theirs, as: attribute.type) {
                return "\(attribute.name): sent \(show(mine)), the entry has \(show(theirs))"
            }
        }
        return nil
    }

    static func show(_ value: JSONValue) -> String {
        switch value {
        case .null, .unsupported: "null"
        case .bool(let flag): String(flag)
        case .integer(let number): String(number)
        case .double(let number): String(number)
        case .string(let text): "\"\(text)\""
        }
    }

    static func list(_ ids: [Int64]) -> String {
        ids.isEmpty ? "none" : ids.sorted(by: >).map(String.init).joined(separator: ", ")
    }
}
