import Foundation
import RevsyncRules
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// The group committer's queue: batches in arrival order up to their size, one leader at a
/// time, and deferred change sets first in the next batch.
@Suite struct CommitQueueTests {
    let harness = ServiceHarness()

    func job(_ count: Int, device: Int64 = 2) -> CommitJob {
        let applier = ChangeSetApplier(store: harness.dataset, schema: harness.schema, limits: ServerSettings.Limits())
        let owner = Device(id: device, publicId: "d", name: "d", user: "u", role: "admin")
        return CommitJob(items: (0..<count).map { _ in applier.item(ChangeSet(seq: nil), device: owner) })
    }

    @Test func batchesTakeChangeSetsInArrivalOrderAndCutARequestAtTheirSize() async {
        let queue = CommitQueue(batchSize: 5)
        let first = job(2), second = job(4), third = job(1)
        #expect(await queue.enqueue(first) == true, "the first request leads")
        #expect(await queue.enqueue(second) == false)
        #expect(await queue.enqueue(third) == false)
        let batch = await queue.takeBatch()
        #expect(batch.items.map(\.job) == [0, 0, 1, 1, 1])
        #expect(batch.jobs.count == 2)
        // The cut request keeps its place at the front.
        _ = await queue.settle(batch, results: batch.items.map { _ in .done(.repeated(revision: 1, seq: 1)) })
        let next = await queue.takeBatch()
        #expect(next.jobs.first === second && next.items.count == 2)
    }

    @Test func deferredChangeSetsGoFirstInTheNextBatch() async {
        let queue = CommitQueue(batchSize: 10)
        let first = job(2), second = job(1), late = job(1)
        _ = await queue.enqueue(first)
        _ = await queue.enqueue(second)
        let batch = await queue.takeBatch()
        _ = await queue.enqueue(late)
        let settled = await queue.settle(batch, results: [.done(.repeated(revision: 1, seq: 1)), .deferred, .done(.repeated(revision: 2, seq: 1))])
        #expect(settled.answers.count == 1 && settled.answers.first?.0 === second.promise, "only the finished request is answered")
        for (promise, signal) in settled.answers { promise.send(signal) }
        guard case .done(.success(let outcomes)) = await second.promise.next() else { Issue.record("the finished request was not answered"); return }
        #expect(outcomes.count == 1)
        let next = await queue.takeBatch()
        #expect(next.jobs.first === first && next.jobs.last === late)
        #expect(next.items.count == 2, "only the deferred change set of the first request is left")
    }

    @Test func theLeadPassesToTheFirstWaitingRequestAndEndsWithTheQueue() async {
        let queue = CommitQueue(batchSize: 1)
        let first = job(1), second = job(1)
        #expect(await queue.enqueue(first))
        #expect(await queue.enqueue(second) == false)
        let batch = await queue.takeBatch()
        _ = await queue.settle(batch, results: [.done(.repeated(revision: 1, seq: 1))])
        await queue.handOff()
        guard case .lead = await second.promise.next() else { Issue.record("the waiting request was not given the lead"); return }
        _ = await queue.takeBatch()
        await queue.handOff()
        #expect(await queue.enqueue(job(1)), "with nobody waiting the lead ended, and the next request takes it")
    }
}
