import Foundation
import Hummingbird
import HummingbirdTesting
import RevsyncTestSupport
import NIOCore
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Bounded work per request: oversized change sets, requests and repairs are refused with
/// the contract's errors, nothing of them applied, and the server's memory stays bounded.
@Suite struct RequestLimitTests {
    static func notes(seq: Int64, count: Int, body: String = "n") -> ChangeSet {
        let ids = (1...Int64(count)).map { -(seq * 1000 + $0) }
        var attributes: [Int64: Attributes] = [:]
        for id in ids { attributes[id] = ["body": .string(body), "pinned": false] }
        return changeSet(seq: seq, ("notes", EntityChanges(create: ids, attributes: attributes)))
    }

    @Test func changeSetWithTooManyOperationsIsRejectedWhole() async throws {
        try await withTestServer(configure: { $0.limits.maxOperationsPerChangeSet = 5 }) { harness in
            let member = try await harness.register("member", name: "member")
            let response = try await harness.sync(member, from: 0, [Self.notes(seq: 1, count: 6), Self.notes(seq: 2, count: 5)])
            let reason = try #require(response.corrective.first?.reason)
            #expect(reason.code == .invalid)
            #expect(reason.message.contains("the limit is 5"))
            #expect(response.committed.map(\.seq) == [2])
            #expect(try await harness.count("notes") == 5)
        }
    }

    @Test func changeSetWhoseLogEntryIsTooLargeTakesNoRevision() async throws {
        try await withTestServer(configure: { $0.limits.maxLogEntryBytes = 2048 }) { harness in
            let member = try await harness.register("member", name: "member")
            let response = try await harness.sync(member, from: 0, [Self.notes(seq: 1, count: 1, body: String(repeating: "x", count: 3000))])
            let reason = try #require(response.corrective.first?.reason)
            #expect(reason.code == .invalid)
            #expect(reason.message.contains("bytes to the log"))
            #expect(try await harness.head() == 0)
            #expect(try await harness.count("notes") == 0)
        }
    }

    @Test func requestWithTooManyOperationsIsRefusedAndAppliesNothing() async throws {
        try await withTestServer(configure: { $0.limits.maxOperationsPerRequest = 3 }) { harness in
            let member = try await harness.register("member", name: "member")
            let (status, body) = try await harness.post(member, SyncRequest(maxRevision: 0, changeSets: [Self.notes(seq: 1, count: 2), Self.notes(seq: 2, count: 2)]))
            #expect(status == .contentTooLarge)
            #expect(try harness.error(body).error == "too_large")
            #expect(try await harness.count("notes") == 0)
        }
    }

    @Test func repairLargerThanItsLimitTellsTheDeviceToBootstrapAgain() async throws {
        try await withTestServer(configure: { $0.limits.maxCorrectiveBytes = 4096 }) { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            // A screen with many items: a member may not delete screens, so the delete is rejected,
            // and its repair would restore every item the device cascaded away locally.
            let items = (1...200).map { Int64(-1000 - $0) }
            var attributes: [Int64: Attributes] = [:]
            for (index, id) in items.enumerated() {
                attributes[id] = ["screen_id": .integer(basics.screen), "label": .string("item \(index) " + String(repeating: "·", count: 40)), "kind": "time", "sort_order": .integer(Int64(index))]
            }
            let seeded = try await harness.sync(admin, from: basics.revision, [changeSet(seq: 2, ("screen_items", EntityChanges(create: items, attributes: attributes)))])
            let member = try await harness.register("member", name: "member")
            let forbidden = changeSet(seq: 1, ("screens", EntityChanges(delete: [basics.screen], attributes: [basics.screen: ["revision": .integer(basics.revision)]])))
            let (status, body) = try await harness.post(member, SyncRequest(maxRevision: seeded.maxRevision, changeSets: [forbidden]))
            #expect(status == .ok)
            #expect(body.readableBytes < 4096)
            let response = try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
            let corrective = try #require(response.corrective.first)
            #expect(corrective.resync == true)
            #expect(corrective.reason?.code == .forbidden)
            #expect(corrective.reason?.message.contains("GET /snapshot") == true)
            #expect(corrective.types.isEmpty)
            #expect(try await harness.count("screen_items") == 201)
        }
    }

    @Test func correctiveSetsOfOneResponseShareOneByteBudget() async throws {
        try await withTestServer(configure: { $0.limits.maxCorrectiveBytesPerResponse = 2000 }) { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            let member = try await harness.register("member", name: "member")
            let sets = (1...20).map { seq in
                changeSet(seq: Int64(seq), ("teams", EntityChanges(update: [basics.team], attributes: [basics.team: ["revision": 0, "city": .string("city \(seq)")]])))
            }
            let response = try await harness.sync(member, from: basics.revision, sets)
            #expect(response.corrective.count == 20)
            #expect(response.corrective.first?.resync == nil)
            #expect(response.corrective.last?.resync == true)
            #expect(response.corrective.allSatisfy { $0.reason?.code == .staleRevision })
        }
    }

    @Test func entityNamesOutsideTheSchemaNeverBecomeMetricLabels() async throws {
        try await withTestServer { harness in
            let member = try await harness.register("member", name: "member")
            let sets = (1...50).map { seq in
                changeSet(seq: Int64(seq), ("made_up_\(seq)", EntityChanges(create: [-Int64(seq)], attributes: [-Int64(seq): ["x": 1]])))
            }
            _ = try await harness.sync(member, from: 0, sets)
            let exposition = harness.server.metrics.exposition()
            #expect(!exposition.contains("made_up_"))
            #expect(exposition.contains(#"entity="unknown""#))
        }
    }

    @Test func aRepeatedUnknownTokenCostsNoQuery() async throws {
        // No reconciliation meanwhile: every lease counted is a request's.
        try await withTestServer(configure: { $0.cacheReconcileInterval = .seconds(3600); $0.historyCheckInterval = .seconds(3600) }) { harness in
            let stranger = TestDevice(id: "", token: "rsd_not_a_token")
            let (first, _) = try await harness.post(stranger, SyncRequest(maxRevision: 0))
            #expect(first == .unauthorized)
            // Let the start-up work (the cache's first look at PostgreSQL) finish before counting.
            try await Task.sleep(for: .milliseconds(500))
            let before = harness.server.database.leases.value
            for _ in 0..<20 {
                let (status, _) = try await harness.post(stranger, SyncRequest(maxRevision: 0))
                #expect(status == .unauthorized)
            }
            // At most one more look-up, should a cache invalidation fall in between; not one per request.
            #expect(harness.server.database.leases.value - before <= 1)
        }
    }

    @Test func lookupsOfUnseenTokensAreThrottled() async throws {
        // One look-up a second (the bucket holds one second's worth), and 40 strangers at once: even on a
        // loaded machine where the 40 take many seconds, most of them must be turned away.
        try await withTestServer(configure: { $0.tokenLookupsPerSecond = 1; $0.cacheReconcileInterval = .seconds(3600); $0.historyCheckInterval = .seconds(3600) }) { harness in
            let before = harness.server.database.leases.value
            let started = ContinuousClock.now
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<40 {
                    let stranger = TestDevice(id: "", token: "rsd_random_\(index)_\(UUID().uuidString)")
                    group.addTask {
                        try await harness.raw("/sync", token: stranger.token, body: ByteBuffer(string: #"{"maxRevision":0,"changeSets":[]}"#)).0.code
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            // A full bucket of 1, then 1 a second.
            let allowed = 1 + Int((ContinuousClock.now - started).seconds) + 1
            let lookedUp = statuses.filter { $0 == 401 }.count
            #expect(statuses.contains(503))
            #expect(lookedUp <= allowed)
            #expect(harness.server.database.leases.value - before <= allowed)
        }
    }

    @Test func requestsPastTheInFlightCapAreAskedToRetry() async throws {
        let gate = Gate()
        try await withTestServer(configure: { $0.maxRequestsInFlight = 1 }, applyDelay: { await gate.wait() }) { harness in
            let member = try await harness.register("member", name: "member")
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await harness.sync(member, from: 0, [Self.notes(seq: 1, count: 1)]) }
                try await gate.waitUntilHeld()
                let (status, _) = try await harness.raw("/health", method: .get, token: nil)
                #expect(status == .serviceUnavailable)
                await gate.open()
                try await group.waitForAll()
            }
            #expect(try await harness.raw("/health", method: .get, token: nil).0 == .ok)
        }
    }
}

extension RequestLimitTests {
    @Test func oneDeviceCannotTakeEveryRequestSlot() async throws {
        let gate = Gate()
        try await withTestServer(configure: { $0.maxRequestsPerDevice = 1 }, applyDelay: { await gate.wait() }) { harness in
            let busy = try await harness.register("member", name: "busy")
            let other = try await harness.register("member", name: "other")
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await harness.sync(busy, from: 0, [Self.notes(seq: 1, count: 1)]) }
                try await gate.waitUntilHeld()
                let (status, body) = try await harness.post(busy, SyncRequest(maxRevision: 0))
                #expect(status == .serviceUnavailable)
                #expect(try harness.error(body).error == "unavailable")
                #expect(try await harness.post(other, SyncRequest(maxRevision: 0)).0 == .ok)
                await gate.open()
                try await group.waitForAll()
            }
            #expect(try await harness.post(busy, SyncRequest(maxRevision: 0)).0 == .ok)
        }
    }

    @Test func metricsNeedTheirTokenWhenOneIsSet() async throws {
        try await withTestServer(configure: { $0.metricsToken = "scrape-me" }) { harness in
            let (refused, body) = try await harness.raw("/metrics", method: .get, token: nil)
            #expect(refused == .unauthorized)
            #expect(try harness.error(body).error == "unauthorized")
            #expect(try await harness.raw("/metrics", method: .get, token: "wrong").0 == .unauthorized)
            let (status, text) = try await harness.raw("/metrics", method: .get, token: "scrape-me")
            #expect(status == .ok)
            #expect(String(buffer: text).contains("revsync_"))
        }
    }

    @Test func unknownRoutesAnswerTheContractsErrorBody() async throws {
        try await withTestServer { harness in
            let (status, body) = try await harness.raw("/nowhere", method: .get, token: nil)
            #expect(status == .notFound)
            #expect(try harness.error(body).error == "not_found")
        }
    }

    /// A served path with a method it does not take is 405 with `Allow` (RFC 9110), not 404:
    /// the methods come from the router's own routes, captures (`/devices/{id}`) included.
    @Test func aMethodAPathDoesNotTakeIs405WithAllow() async throws {
        try await withTestServer { harness in
            let cases: [(HTTPRequest.Method, String, String?)] = [
                (.get, "/sync", "POST"),
                (.put, "/sync/", "POST"),
                (.delete, "/devices", "GET, HEAD, POST"),
                (.put, "/devices/\(UUID().uuidString)", "DELETE, PATCH"),
                (.get, "/devices/any-id/token", "POST"),
                // The router takes `me` as the literal route, whatever the method: never as an id.
                (.delete, "/devices/me", "GET, HEAD"),
                (.post, "/health", "GET, HEAD"),
                (.delete, "/snapshot", "GET, HEAD"),
                (.get, "/nowhere", nil),
                (.get, "/devices/a/b/c", nil),
                (.post, "/syncs", nil),
                (.head, "/sync", "POST"),
                (.options, "/health", "GET, HEAD"),
            ]
            for (method, path, allowed) in cases {
                let (status, allow, body) = try await harness.client.execute(uri: path, method: method, headers: [:], body: nil) {
                    ($0.status, $0.headers[.allow], $0.body)
                }
                let error = try harness.error(body)
                #expect(!String(buffer: body).contains(#"\/"#), "slashes escaped: \(String(buffer: body))")
                #expect(String(buffer: body).hasPrefix(#"{"error":"#), "\(String(buffer: body))")
                if let allowed {
                    #expect(status == .methodNotAllowed, "\(method) \(path)")
                    #expect(allow == allowed, "\(method) \(path)")
                    #expect(error.error == "method_not_allowed" && error.message.contains(allowed), "\(method) \(path): \(error.message)")
                } else {
                    #expect(status == .notFound, "\(method) \(path)")
                    #expect(allow == nil && error.error == "not_found", "\(method) \(path)")
                }
            }
            #expect(harness.server.metrics.exposition().contains("status=\"405\""))
        }
    }
}

/// Holds the first change set inside its transaction until opened.
actor Gate {
    private var isOpen = false
    private var held = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        held = true
        guard !isOpen else { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
    }

    /// Returns once a change set waits at the gate. Gives up after 30 s, and opens the gate
    /// first: a change set that reaches it later then goes on, where it would have waited for
    /// ever, and with it the test's implicit wait for its request (a hang instead of a failure).
    func waitUntilHeld() async throws {
        let started = ContinuousClock.now
        while !held {
            guard ContinuousClock.now - started < .seconds(30) else {
                open()
                throw TestSetupError("the change set never reached the gate within 30 s")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
