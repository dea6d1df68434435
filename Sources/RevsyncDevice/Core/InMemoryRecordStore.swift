import RevsyncRules
import RevsyncWire

/// A `RecordStore` in memory: for tests of the sync rules, previews and tools.
public final class InMemoryRecordStore: RecordStore {
    public private(set) var tables: [String: [Int64: DeviceRecord]] = [:]
    private var storedMeta = DeviceMeta()
    private var pending: [Int64: ChangeSet] = [:]
    private var temporaryIds: [Int64: TemporaryIdMapping] = [:]
    private var renamedTemporaryIds: [RecordKey: Int64] = [:]

    public init(meta: DeviceMeta = DeviceMeta()) {
        self.storedMeta = meta
    }

    /// Runs `body` all or nothing: when it throws, the store is as before
    /// (what a SQLite transaction gives the real store).
    public func atomically<Value>(_ body: () throws -> Value) throws -> Value {
        let saved = (tables, storedMeta, pending, temporaryIds, renamedTemporaryIds)
        do {
            return try body()
        } catch {
            (tables, storedMeta, pending, temporaryIds, renamedTemporaryIds) = saved
            throw error
        }
    }

    public func record(_ entity: String, id: Int64) throws -> DeviceRecord? {
        tables[entity]?[id]
    }

    public func put(_ entity: String, _ record: DeviceRecord) throws {
        tables[entity, default: [:]][record.id] = record
    }

    @discardableResult
    public func remove(_ entity: String, id: Int64) throws -> Bool {
        tables[entity]?.removeValue(forKey: id) != nil
    }

    public func ids(_ entity: String, where attribute: String, equals value: Int64) throws -> [Int64] {
        (tables[entity] ?? [:]).values.filter { $0.attributes[attribute] == .integer(value) }.map(\.id).sorted()
    }

    public func records(_ entity: String, matching query: RecordQuery) throws -> [DeviceRecord] {
        query.evaluate(Array((tables[entity] ?? [:]).values))
    }

    public func removeAllRecords() throws {
        tables = [:]
    }

    public func meta() throws -> DeviceMeta { storedMeta }

    public func setMeta(_ meta: DeviceMeta) throws { storedMeta = meta }

    public func outbox() throws -> [ChangeSet] {
        pending.keys.sorted().compactMap { pending[$0] }
    }

    public func appendToOutbox(_ changeSet: ChangeSet) throws {
        guard let seq = changeSet.seq else { throw DeviceError.unsupportedEdit("an outbox change set needs a seq") }
        pending[seq] = changeSet
    }

    public func replaceInOutbox(_ changeSet: ChangeSet) throws {
        try appendToOutbox(changeSet)
    }

    public func removeFromOutbox(seq: Int64) throws {
        pending[seq] = nil
    }

    public func temporaryIdMapping(_ temporaryId: Int64) throws -> TemporaryIdMapping? {
        temporaryIds[temporaryId]
    }

    public func setTemporaryIdMapping(_ temporaryId: Int64, to mapping: TemporaryIdMapping) throws {
        temporaryIds[temporaryId] = mapping
    }

    public func renamedTemporaryId(_ entity: String, _ temporaryId: Int64) throws -> Int64? {
        renamedTemporaryIds[RecordKey(entity, temporaryId)]
    }

    public func setRenamedTemporaryId(_ entity: String, from temporaryId: Int64, to renamed: Int64) throws {
        renamedTemporaryIds[RecordKey(entity, temporaryId)] = renamed
    }
}
