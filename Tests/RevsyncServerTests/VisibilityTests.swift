import Foundation
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Revisions are gap-free and become visible in order, however writers overlap.
@Suite struct VisibilityTests {
    @Test func concurrentWritersNeverLetAReaderSeeARevisionBeforeAllEarlierOnes() async throws {
        let writers = 8, setsPerWriter = 12
        // Random pauses inside each transaction, just before the revision lock, make commits overlap.
        let delay: ApplyDelay = { try? await Task.sleep(for: .milliseconds(Int.random(in: 0...15))) }
        try await withTestServer(applyDelay: delay) { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            var devices: [TestDevice] = []
            for index in 0..<writers { devices.append(try await harness.register("member", name: "writer\(index)")) }
            let reader = try await harness.register("viewer", name: "reader")
            let target = basics.revision + Int64(writers * setsPerWriter)

            let observed = try await withThrowingTaskGroup(of: [[Int64]].self) { group in
                for device in devices {
                    group.addTask {
                        for seq in 1...Int64(setsPerWriter) {
                            let set = changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": .string("from \(device.id)"), "pinned": false]])))
                            // Each change set in its own request, so requests of all writers interleave.
                            _ = try await harness.sync(device, from: basics.revision, [set])
                        }
                        return []
                    }
                }
                group.addTask {
                    // The reader catches up over and over, recording what each answer held.
                    var batches: [[Int64]] = []
                    var position: Int64 = 0
                    let deadline = ContinuousClock.now + .seconds(60)
                    while position < target && ContinuousClock.now < deadline {
                        let response = try await harness.sync(reader, from: position)
                        let revisions = response.changeSets.compactMap(\.revision)
                        batches.append([position] + revisions + [response.maxRevision])
                        position = response.maxRevision
                    }
                    return batches
                }
                var all: [[Int64]] = []
                for try await batch in group { all += batch }
                return all
            }

            for batch in observed {
                let start = batch[0], maxRevision = batch[batch.count - 1], revisions = Array(batch.dropFirst().dropLast())
                let expected = revisions.isEmpty ? [] : Array((start + 1)...(start + Int64(revisions.count)))
                #expect(revisions == expected, "after \(start) the reader got \(revisions)")
                #expect(maxRevision == (revisions.last ?? start))
            }
            #expect(observed.last.map { $0[$0.count - 1] } == target)
            let log = try await harness.rows("SELECT revision FROM revsync_log ORDER BY revision").map { try $0.decode(Int64.self) }
            #expect(log == Array(1...target))
            #expect(try await harness.count("notes") == writers * setsPerWriter)
        }
    }
}
