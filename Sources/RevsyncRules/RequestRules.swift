import RevsyncWire

/// The limits of one `/sync` request as a whole, checked before anything of it applies.
public enum RequestRules {
    public static func check(_ request: SyncRequest, maxChangeSets: Int, maxOperations: Int) throws(SyncRefusal) {
        guard request.maxRevision >= 0 else {
            throw SyncRefusal(.invalidRequest, "maxRevision must be 0 or more, not \(request.maxRevision)")
        }
        if let wait = request.wait {
            guard wait.isFinite, wait >= 0 else {
                throw SyncRefusal(.invalidRequest, "wait must be a number of seconds, 0 or more, not \(wait)")
            }
        }
        guard request.changeSets.count <= maxChangeSets else {
            throw SyncRefusal(.tooLarge, "\(request.changeSets.count) change sets in one request; the limit is \(maxChangeSets): send the rest next")
        }
        let operations = request.changeSets.reduce(0) { total, set in
            total + set.entities.values.reduce(0) { $0 + $1.create.count + $1.update.count + $1.delete.count }
        }
        guard operations <= maxOperations else {
            throw SyncRefusal(.tooLarge, "\(operations) operations in one request; the limit is \(maxOperations): send fewer change sets at a time")
        }
    }
}
