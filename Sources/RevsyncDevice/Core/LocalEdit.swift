import Foundation
import RevsyncWire

/// The result of one local transaction.
public struct LocalEditResult<Value> {
    public var value: Value
    /// The change set queued in the outbox, with its `seq`; nil when nothing changed.
    public var changeSet: ChangeSet?
    public var changes: RecordChanges
}

extension LocalEditResult: Sendable where Value: Sendable {}

/// Runs a local transaction against a store: the edits, the new change set in
/// the outbox and the counters. Callers run it inside one storage transaction,
/// so a failure (or crash) leaves no trace of it.
public enum LocalEdit {
    /// Runs `body` and queues its edits as one change set. A change set of more than
    /// `maxOperations` creates, updates and deletes throws `DeviceError.tooManyOperations`
    /// (the server would reject it whole as `invalid`), one of more than `maxBytes` bytes of
    /// JSON `DeviceError.changeSetTooManyBytes` (the server rejects it as `invalid`, or
    /// refuses every request that carries it, even alone, as `413`: queued, it would stop
    /// every later change set behind it).
    public static func perform<Value>(
        on store: any RecordStore, schema: LocalSchema, maxOperations: Int? = nil, maxBytes: Int? = nil, _ body: (Transaction) throws -> Value
    ) throws -> LocalEditResult<Value> {
        var meta = try store.meta()
        let transaction = Transaction(store: store, schema: schema, nextTemporaryId: meta.nextTemporaryId)
        let value = try body(transaction)
        guard var changeSet = try transaction.finish() else {
            return LocalEditResult(value: value, changeSet: nil, changes: transaction.changes)
        }
        if let maxOperations, changeSet.operationCount > maxOperations {
            throw DeviceError.tooManyOperations(count: changeSet.operationCount, limit: maxOperations)
        }
        if let maxBytes {
            let bytes = try JSONEncoder().encode(changeSet).count
            if bytes > maxBytes { throw DeviceError.changeSetTooManyBytes(bytes: bytes, limit: maxBytes) }
        }
        changeSet.seq = meta.nextSeq
        meta.nextSeq += 1
        meta.nextTemporaryId = transaction.nextTemporaryId
        try store.appendToOutbox(changeSet)
        try store.setMeta(meta)
        return LocalEditResult(value: value, changeSet: changeSet, changes: transaction.changes)
    }
}
