import RevsyncWire

extension ChangeSet {
    /// Its creates, updates and deletes, counted as the server counts them against
    /// its operation limits (the records a cascade adds on the server do not count).
    public var operationCount: Int {
        entities.values.reduce(0) { $0 + $1.create.count + $1.update.count + $1.delete.count }
    }
}
