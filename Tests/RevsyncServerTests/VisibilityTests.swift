import Foundation
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Revisions are gap-free and become visible in order, however writers overlap.
@Suite struct VisibilityTests {
    /// Writers on two server instances (two committers, two pools) on one database, each
    /// pausing between taking a revision and committing, while a reader catches up.
    @Test func concurrentWritersNeverLetAReaderSeeARevisionBeforeAllEarlierOnes() async throws {
        // Random pauses between each change set's revision stamp and its batch's COMMIT: a writer
        // that let a later revision commit before an earlier one would show here.
        let delay: ApplyDelay = { try? await Task.sleep(for: .milliseconds(Int.random(in: 0...15))) }
        try await withTestServer(applyDelay: delay) { first in
            try await first.withSecondInstance(applyDelay: delay) { second in
                try await Self.writeAndRead(first: first, second: second)
            }
        }
    }

    static func writeAndRead(first: TestHarness, second: TestHarness) async throws {
        let writers = 8, setsPerWriter = 12
        let admin = try await first.register("admin", name: "admin")
        let basics = try await first.seedBasics(admin)
        var devices: [TestDevice] = []
        for index in 0..<writers { devices.append(try await first.register("member", name: "writer\(index)")) }
        let reader = try await first.register("viewer", name: "reader")
        let target = basics.revision + Int64(writers * setsPerWriter)

        let observed = try await withThrowingTaskGroup(of: [[Int64]].self) { group in
            for (index, device) in devices.enumerated() {
                // Half the writers go through the second instance.
                let instance = index.isMultiple(of: 2) ? first : second
                group.addTask {
                    for seq in 1...Int64(setsPerWriter) {
                        let set = changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": .string("from \(device.id)"), "pinned": false]])))
                        // Each change set in its own request, so requests of all writers interleave.
                        _ = try await instance.sync(device, from: basics.revision, [set])
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
                    let response = try await first.sync(reader, from: position)
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
        let log = try await first.rows("SELECT revision FROM revsync_log ORDER BY revision").map { try $0.decode(Int64.self) }
        #expect(log == Array(1...target))
        #expect(try await first.count("notes") == writers * setsPerWriter)
    }
}
