import CompressNIO
import Foundation
import Hummingbird
import NIOCore
import RevsyncWire
import Testing
@testable import RevsyncServer

/// `/snapshot` is the state the log replays to, at the revision it names.
@Suite struct SnapshotTests {
    typealias State = [String: [Int64: Attributes]]

    /// Applies catch-up change sets the way a device does.
    static func replay(_ changeSets: [ChangeSet], into state: inout State) {
        for set in changeSets {
            for entity in set.types {
                guard let changes = set.entities[entity] else { continue }
                for id in changes.create {
                    var attributes = changes.attributes[id] ?? [:]
                    attributes[ReservedAttribute.oldId] = nil
                    state[entity, default: [:]][id] = attributes
                }
                for id in changes.update {
                    state[entity, default: [:]][id]?.merge(changes.attributes[id] ?? [:]) { _, new in new }
                }
                for id in changes.delete { state[entity]?[id] = nil }
            }
        }
    }

    @Test func snapshotEqualsTheStateReplayedFromTheLog() async throws {
        try await withTestServer(configure: { $0.limits.catchUpMaxChangeSets = 4 }) { harness in
            let admin = try await harness.register("admin", name: "admin")
            let member = try await harness.register("member", name: "member")
            let basics = try await harness.seedBasics(admin)
            let second = try await harness.seedBasics(admin, seq: 2)
            var head = try await harness.head()
            _ = try await harness.sync(member, from: head, [
                changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["author_id": .integer(basics.user), "player_id": .integer(basics.player), "body": "fast", "pinned": true]]))),
                changeSet(seq: 2, ("players", EntityChanges(update: [basics.player], attributes: [basics.player: ["revision": .integer(basics.revision), "number": 10, "position": "wing"]]))),
                changeSet(seq: 3, ("screen_instances", EntityChanges(create: [-2], attributes: [-2: ["screen_id": .integer(second.screen), "player_id": .integer(second.player), "date": "2024-03-03T08:00:00.123456+01:00", "comment": "ok"]]))),
            ])
            head = try await harness.head()
            // A cascade (team → players, screens, …) and a set null (user → notes.author_id).
            _ = try await harness.sync(admin, from: head, [
                changeSet(seq: 3, ("teams", EntityChanges(delete: [basics.team], attributes: [basics.team: ["revision": .integer(basics.revision)]]))),
                changeSet(seq: 4, ("users", EntityChanges(delete: [second.user], attributes: [second.user: ["revision": .integer(second.revision)]]))),
            ])
            head = try await harness.head()

            let viewer = try await harness.register("viewer", name: "viewer")
            var state: State = [:]
            var position: Int64 = 0
            while true {
                let page = try await harness.sync(viewer, from: position)
                Self.replay(page.changeSets, into: &state)
                position = page.maxRevision
                if page.more != true { break }
            }
            #expect(position == head)

            for gzip in [false, true] {
                let headers: HTTPFields = gzip ? [.acceptEncoding: "gzip"] : [:]
                var (status, body) = try await harness.raw("/snapshot", method: .get, token: viewer.token, headers: headers)
                #expect(status == .ok)
                if gzip { body = try body.decompress(with: .gzip) }
                let snapshot = try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
                #expect(snapshot.maxRevision == head)
                var snapshotState: State = [:]
                Self.replay(snapshot.changeSets, into: &snapshotState)
                let nonEmpty = { (state: State) in state.filter { !$0.value.isEmpty } }
                #expect(nonEmpty(snapshotState) == nonEmpty(state))
                #expect(snapshotState["players"]?.count == 1)
                #expect(snapshotState["teams"]?.count == 1)
            }
        }
    }

    /// Tables are read a page at a time (`forEachPage`): the snapshot is the same whatever the
    /// page's size, one row, a size that divides a table, or one larger than every table.
    @Test func theSnapshotIsTheSameReadInPagesOfAnySize() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            _ = try await harness.seedBasics(admin)
            let member = try await harness.register("member", name: "member")
            _ = try await harness.sync(member, from: try await harness.head(), CacheTests.notes(from: 1, count: 7))
            func read(pagesOf size: Int) async throws -> [UInt8] {
                var bytes: [UInt8] = []
                try await SnapshotStreamer(database: harness.server.database, schema: harness.server.schema, pageSize: size).stream { chunk in
                    bytes += Array(chunk.readableBytesView)
                }
                return bytes
            }
            let whole = try await read(pagesOf: 10_000)
            for size in [1, 2, 7, 8] {
                #expect(try await read(pagesOf: size) == whole, "pages of \(size)")
            }
            let snapshot = try JSONDecoder().decode(SyncResponse.self, from: Data(whole))
            let notes = snapshot.changeSets.first?.entities["notes"]
            let stored = try await harness.count("notes")
            #expect(notes?.create.count == stored)
            #expect(notes?.create == notes?.create.sorted())
        }
    }
}
