import Foundation
import NIOCore
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// The three requests issue 9 names as memory bombs are answered with the right error, and
/// the server's memory stays flat: the resident size grows by less than `rssBound`.
///
/// Unbounded, the corrective bomb alone would build about 300 MB of repairs in one response.
/// It loads PostgreSQL for most of a minute and measures the process's memory, so it runs
/// alone, after the other tests: `Scripts/test` runs it with REVSYNC_HEAVY_TESTS=1.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["REVSYNC_HEAVY_TESTS"] == "1", "set REVSYNC_HEAVY_TESTS=1 (Scripts/test does)"))
struct AbuseMemoryTests {
    static let rssBound = 200 * 1024 * 1024

    static func residentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    @Test func bombsAreRefusedWithTheRightErrorsAndMemoryStaysFlat() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            let items = (1...300).map { Int64(-1000 - $0) }
            var attributes: [Int64: Attributes] = [:]
            for (index, id) in items.enumerated() {
                attributes[id] = ["screen_id": .integer(basics.screen), "label": .string(String(repeating: "x", count: 1000)), "kind": "time", "sort_order": .integer(Int64(index))]
            }
            let seeded = try await harness.sync(admin, from: basics.revision, [changeSet(seq: 2, ("screen_items", EntityChanges(create: items, attributes: attributes)))])
            let member = try await harness.register("member", name: "member")
            let before = Self.residentBytes()

            // 1. The corrective-set bomb: 1,000 forbidden deletes of a parent with 300 large children.
            let deletes = (1...1000).map { seq in
                changeSet(seq: Int64(seq), ("screens", EntityChanges(delete: [basics.screen], attributes: [basics.screen: ["revision": .integer(basics.revision)]])))
            }
            let (status, body) = try await harness.post(member, SyncRequest(maxRevision: seeded.maxRevision, changeSets: deletes))
            #expect(status == .ok)
            #expect(body.readableBytes < 10 * 1024 * 1024)
            let response = try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
            #expect(response.corrective.count == 1000)
            #expect(response.corrective.allSatisfy { $0.reason?.code == .forbidden })
            #expect(response.corrective.last?.resync == true)

            // 2. The huge change set: 60,000 creates in one request.
            let ids = (1...60_000).map { Int64(-100_000 - $0) }
            var notes: [Int64: Attributes] = [:]
            for id in ids { notes[id] = ["body": "n", "pinned": false] }
            let huge = changeSet(seq: 1001, ("notes", EntityChanges(create: ids, attributes: notes)))
            let (hugeStatus, hugeBody) = try await harness.post(member, SyncRequest(maxRevision: seeded.maxRevision, changeSets: [huge]))
            #expect(hugeStatus == .contentTooLarge)
            #expect(try harness.error(hugeBody).error == "too_large")

            // 3. 10,000 entity names the schema does not have.
            let unknown = (0..<1000).map { set in
                var changes = ChangeSet(seq: Int64(1001 + set))
                for name in 0..<10 { changes["nope_\(set)_\(name)"] = EntityChanges(create: [-Int64(200_000 + set * 10 + name)], attributes: [-Int64(200_000 + set * 10 + name): ["x": 1]]) }
                return changes
            }
            let unknownResponse = try await harness.sync(member, from: seeded.maxRevision, unknown)
            #expect(unknownResponse.corrective.count == 1000)
            #expect(unknownResponse.corrective.allSatisfy { $0.reason?.code == .invalid })
            let metrics = harness.server.metrics.exposition()
            #expect(!metrics.contains("nope_"))
            #expect(metrics.utf8.count < 64 * 1024)

            let after = Self.residentBytes()
            print("AbuseMemoryTests: resident memory \(before / 1_048_576) MiB before, \(after / 1_048_576) MiB after")
            #expect(after - before < Self.rssBound, "resident memory grew by \(after - before) bytes")
            #expect(try await harness.count("screen_items") == 301)
            #expect(try await harness.head() == seeded.maxRevision)
        }
    }
}
