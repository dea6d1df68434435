import RevsyncDevice

/// One device's counters, summed into the report at the end.
struct DeviceTally: Sendable {
    var operations = OperationCounts()
    var changeSets = ChangeSetCounts()
    var crashes = 0

    mutating func add(_ result: ActionResult, offline: Bool) {
        operations.transactions += 1
        operations.creates += result.creates
        operations.updates += result.updates
        operations.deletes += result.deletes
        if offline { operations.offlineTransactions += 1 }
    }

    mutating func add(_ report: SyncReport) {
        operations.syncRounds += 1
        count(report)
    }

    /// A long-poll the server answered; `report` is what it brought, if anything.
    mutating func addLongPoll(_ report: SyncReport?) {
        operations.longPolls += 1
        guard let report else { return }
        operations.longPollsWithChanges += 1
        count(report)
    }

    private mutating func count(_ report: SyncReport) {
        if report.bootstrapped { operations.bootstraps += 1 }
        changeSets.sent += report.sentChangeSets
        changeSets.acknowledged += report.acknowledged.count
        changeSets.received += report.receivedChangeSets
        changeSets.retries += report.retries
        for conflict in report.conflicts {
            changeSets.rejectedByReason[conflict.reason.code.rawValue, default: 0] += 1
        }
    }

    static func + (lhs: DeviceTally, rhs: DeviceTally) -> DeviceTally {
        var sum = lhs
        sum.operations.transactions += rhs.operations.transactions
        sum.operations.creates += rhs.operations.creates
        sum.operations.updates += rhs.operations.updates
        sum.operations.deletes += rhs.operations.deletes
        sum.operations.offlineTransactions += rhs.operations.offlineTransactions
        sum.operations.refusedLocally += rhs.operations.refusedLocally
        sum.operations.syncRounds += rhs.operations.syncRounds
        sum.operations.longPolls += rhs.operations.longPolls
        sum.operations.longPollsWithChanges += rhs.operations.longPollsWithChanges
        sum.operations.bootstraps += rhs.operations.bootstraps
        sum.changeSets.sent += rhs.changeSets.sent
        sum.changeSets.acknowledged += rhs.changeSets.acknowledged
        sum.changeSets.received += rhs.changeSets.received
        sum.changeSets.retries += rhs.changeSets.retries
        sum.changeSets.failedRounds += rhs.changeSets.failedRounds
        sum.changeSets.rejectedByReason.merge(rhs.changeSets.rejectedByReason, uniquingKeysWith: +)
        sum.crashes += rhs.crashes
        return sum
    }
}
