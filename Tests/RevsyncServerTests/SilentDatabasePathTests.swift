import Foundation
import NIOCore
import PostgresNIO
import RevsyncLink
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// PostgreSQL connections whose path dies without a word (a NAT or firewall that forgot them,
/// a failover that moved the address): nothing is closed, nothing answers, and before the
/// connections carried TCP keep-alive and a user timeout the pool kept them, each waiting on
/// its keep-alive `SELECT 1` for as long as the kernel retransmits (about 15 minutes), and every
/// request got 503 while PostgreSQL was reachable all along.
///
/// The dead path is made with an nftables table of its own that drops the packets of the
/// instance's connections at that moment, both ways; new connections pass. It needs root and
/// `nft` (Scripts/setup installs nftables), and touches only connections to a relay of its own.
@Suite struct SilentDatabasePathTests {
    static func note(_ seq: Int64) -> ChangeSet {
        changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": "n", "pinned": false]])))
    }

    @Test func connectionsWhosePathDiedSilentlyAreReplacedWithinSeconds() async throws {
        try await withTestServer { harness in
            var url = try #require(URLComponents(string: harness.server.settings.databaseURL))
            let relay = try await TCPRelay.start(to: try #require(url.host), port: url.port ?? 5432)
            url.host = "127.0.0.1"
            url.port = relay.port
            // Quick to give up, so that the test is short: a probe after a second of silence,
            // and sent bytes unacknowledged for two seconds end the connection.
            url.queryItems = (url.queryItems ?? []) + [
                URLQueryItem(name: "keepalives_idle", value: "1"), URLQueryItem(name: "keepalives_interval", value: "1"),
                URLQueryItem(name: "tcp_user_timeout", value: "2000"),
            ]
            let through = try #require(url.string)
            let phone = try await harness.register("member", name: "phone")
            do {
                try await Self.silenceTheConnections(of: harness, through: through, relay: relay, phone: phone)
            } catch {
                await relay.stop()
                throw error
            }
            await relay.stop()
        }
    }

    /// A second instance reaches PostgreSQL through `relay`; its connections then go silent.
    static func silenceTheConnections(of harness: TestHarness, through: String, relay: TCPRelay, phone: TestDevice) async throws {
            try await harness.withSecondInstance(configure: {
                $0.databaseURL = through
                $0.databaseConnections = 3
                $0.databaseKeepAlive = .seconds(1)
                $0.databaseTimeout = .seconds(3)
            }) { other in
                _ = try await other.sync(phone, from: 0, [Self.note(1)])
                try await other.warmPool(3, asRequests: true)
                let ports = try await Self.clientPorts(to: relay.port)
                try #require(!ports.isEmpty, "the instance has no connection to the relay")
                let silence = try await SilentFlows.drop(port: relay.port, clientPorts: ports)
                do {
                    // Past the pool's keep-alive interval: each idle connection now waits on a
                    // `SELECT 1` that nothing will answer.
                    try await Task.sleep(for: .milliseconds(1500))
                    let cut = ContinuousClock.now
                    // The same change set each time: a 503 commits nothing.
                    var synced = false
                    while !synced, ContinuousClock.now - cut < .seconds(45) {
                        let (status, body) = try await other.post(phone, SyncRequest(maxRevision: 0, changeSets: [Self.note(2)]))
                        synced = status == .ok
                        if synced { break }
                        #expect(status == .serviceUnavailable, "a sync during the silence was answered \(status): \(String(buffer: body))")
                        try await Task.sleep(for: .milliseconds(200))
                    }
                    #expect(synced, "no sync went through within 45 s of the path dying: the pool kept its dead connections")
                    let left = Set(try await Self.clientPorts(to: relay.port)).intersection(ports)
                    #expect(left.isEmpty, "connections on the dead path still open: \(left.sorted())")
                } catch {
                    do { try await silence.remove() } catch let left { Issue.record("the nftables table \(silence.table) was left: \(left)") }
                    throw error
                }
                try await silence.remove()
            }
    }

    /// The local ports of this machine's established connections to `port` on loopback.
    static func clientPorts(to port: Int) async throws -> [Int] {
        let output = try await runProgram(["ss", "-Htn", "state", "established", "dport = :\(port)"])
        // Recv-Q, Send-Q, local address:port, peer address:port.
        return String(decoding: output, as: UTF8.self).split(separator: "\n").compactMap { line in
            let fields = line.split(whereSeparator: \.isWhitespace)
            guard fields.count >= 3, let colon = fields[2].lastIndex(of: ":") else { return nil }
            return Int(fields[2][fields[2].index(after: colon)...])
        }
    }
}

/// Loopback connections made silent: their packets dropped both ways by an nftables table of
/// their own, named after the port, which `remove()` deletes.
struct SilentFlows {
    let table: String

    static func drop(port: Int, clientPorts: [Int]) async throws -> SilentFlows {
        let table = "revsync_silent_\(port)"
        let ports = clientPorts.map(String.init).joined(separator: ", ")
        // Added, deleted and made again: a table left by a run that was killed goes first.
        let rules = """
            add table inet \(table)
            delete table inet \(table)
            table inet \(table) {
              chain output {
                type filter hook output priority 0; policy accept;
                tcp dport \(port) tcp sport { \(ports) } drop
                tcp sport \(port) tcp dport { \(ports) } drop
              }
            }
            """
        do {
            _ = try await runProgram(["nft", "-f", "-"], input: Data(rules.utf8))
        } catch {
            throw TestSetupError("could not drop packets with nftables (root and the nftables package are needed; Scripts/setup installs it): \(error)")
        }
        return SilentFlows(table: table)
    }

    func remove() async throws {
        _ = try await runProgram(["nft", "delete", "table", "inet", table])
    }
}
