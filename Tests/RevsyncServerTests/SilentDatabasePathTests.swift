import Foundation
import NIOCore
import PostgresNIO
import RevsyncLink
import RevsyncWire
import Testing
@testable import RevsyncServer

/// PostgreSQL connections whose path dies without a word (a NAT or firewall that forgot them,
/// a failover that moved the address): nothing is closed, nothing answers. Before the
/// connections carried TCP keep-alive and a user timeout, the pool kept them, each waiting on
/// its keep-alive `SELECT 1` for as long as the kernel retransmits (about 15 minutes), and every
/// request got 503 while PostgreSQL was reachable all along; PostgreSQL's end of each kept its
/// backend, and whatever that backend's transaction held, for the system's two hours.
///
/// `SilentFlows` drops the packets of the instance's connections at that moment, both ways,
/// with nftables (root, Scripts/setup installs it); new connections pass. The instance's own
/// connections are told apart from the rest of the suite's by their `application_name`.
@Suite struct SilentDatabasePathTests {
    static func note(_ seq: Int64) -> ChangeSet {
        changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": "n", "pinned": false]])))
    }

    @Test func connectionsWhosePathDiedSilentlyAreReplacedWithinSeconds() async throws {
        try await withTestServer { harness in
            var url = try #require(URLComponents(string: harness.server.settings.databaseURL))
            let name = "silent-\(UUID().uuidString.prefix(8))", port = url.port ?? 5432
            // Quick to give up, so that the test is short: a probe after a second of silence,
            // and sent bytes unacknowledged for two seconds end the connection, at both ends.
            url.queryItems = (url.queryItems ?? []) + [
                URLQueryItem(name: "application_name", value: name), URLQueryItem(name: "keepalives_idle", value: "1"),
                URLQueryItem(name: "keepalives_interval", value: "1"), URLQueryItem(name: "tcp_user_timeout", value: "2000"),
            ]
            let through = try #require(url.string)
            let phone = try await harness.register("member", name: "phone")
            try await harness.withSecondInstance(configure: {
                $0.databaseURL = through
                $0.databaseConnections = 3
                $0.databaseKeepAlive = .seconds(1)
                $0.databaseTimeout = .seconds(3)
            }) { other in
                _ = try await other.sync(phone, from: 0, [Self.note(1)])
                try await other.warmPool(3, asRequests: true)
                let ports = try await Self.backendClientPorts(harness, name: name)
                try #require(!ports.isEmpty, "the instance has no connection named \(name) to PostgreSQL")
                let silence = try await SilentFlows.drop(port: port, clientPorts: ports, table: "revsync_test_\(port)_\(ports[0])")
                do {
                    try await Self.writeGoesThrough(other, phone: phone)
                    #expect(try await silence.stillOpen().isEmpty, "the instance's connections on the dead path are still open")
                    // PostgreSQL's end gives up too: its backends end, and nothing they held stays held.
                    try await eventually("PostgreSQL ended the backends of the dead connections", within: .seconds(20)) {
                        try await Set(Self.backendClientPorts(harness, name: name)).isDisjoint(with: ports)
                    }
                } catch {
                    do { try await silence.remove() } catch let left { Issue.record("the nftables table \(silence.table) was left: \(left)") }
                    throw error
                }
                try await silence.remove()
            }
        }
    }

    /// Past the pool's keep-alive interval every idle connection waits on a `SELECT 1` that
    /// nothing will answer; a write must still go through within 45 s. The same change set each
    /// time: a 503 commits nothing.
    static func writeGoesThrough(_ instance: TestHarness, phone: TestDevice) async throws {
        try await Task.sleep(for: .milliseconds(1500))
        let cut = ContinuousClock.now
        var synced = false
        while !synced, ContinuousClock.now - cut < .seconds(45) {
            let (status, body) = try await instance.post(phone, SyncRequest(maxRevision: 0, changeSets: [Self.note(2)]))
            synced = status == .ok
            if synced { break }
            #expect(status == .serviceUnavailable, "a sync during the silence was answered \(status): \(String(buffer: body))")
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(synced, "no sync went through within 45 s of the path dying: the pool kept its dead connections")
    }

    /// The client-side ports of PostgreSQL's backends named `name`.
    static func backendClientPorts(_ harness: TestHarness, name: String) async throws -> [Int] {
        try await harness.rows("SELECT client_port FROM pg_stat_activity WHERE application_name = \(name)").map {
            Int(try $0.decode(Int32.self))
        }
    }
}
