import Foundation
import PostgresNIO
import RevsyncLink

extension SoakRun {
    /// Makes instance `index`'s open connections to PostgreSQL silent for good (`SilentFlows`),
    /// then watches both ends give them up: the instance's sockets close, PostgreSQL's backends
    /// on them end. New connections pass throughout, so the instance must serve on through
    /// the ones its pool opens. The packets stay dropped until both ends gave up, or for
    /// ``SilentPathRecovery/bound``: past that a later connection could be given one of the ports.
    func silencePostgresPath(of index: Int, fleet: ServerFleet) async throws {
        let kind = FaultKind.postgresPathDies.rawValue
        let url = fleet.configuration.databaseURL
        let port = URLComponents(string: url)?.port ?? 5432
        guard let process = await fleet.processIdentifier(index) else {
            note(kind, "instance \(index) is not running; nothing made silent")
            return
        }
        let ports = try await SilentFlows.clientPorts(to: port, process: process)
        guard !ports.isEmpty else {
            note(kind, "instance \(index) had no connection open to PostgreSQL; nothing made silent")
            return
        }
        let logger = self.logger
        try await SoakDatabase.withClient(url: url, logger: logger) { client in
            let silence = try await SilentFlows.drop(port: port, clientPorts: ports, table: "revsync_soak_\(port)_\(process)")
            await self.note(kind, "instance \(index) (port \(fleet.configuration.ports[index])): its \(ports.count) connections to PostgreSQL "
                + "die without a word (their packets dropped both ways, for good); new connections pass")
            let recovery = await Self.watch(silence, of: index, process: process, fleet: fleet, client: client, logger: logger)
            try await silence.remove()
            await self.record(recovery)
        }
    }

    private func record(_ recovery: SilentPathRecovery) {
        silentPathRecoveries.append(recovery)
        let bound = "not within \(format(SilentPathRecovery.bound))"
        let seconds = { (value: Double?) in value.map { String(format: "%.1f s", $0) } ?? bound }
        if recovery.restarted {
            note("postgres_path_not_judged", "instance \(recovery.instance) was restarted while its silent connections were watched")
        } else {
            note("postgres_path_given_up", "instance \(recovery.instance) closed its silent connections after "
                + "\(seconds(recovery.instanceClosedAfter)); PostgreSQL ended their backends after \(seconds(recovery.postgresEndedAfter))")
        }
    }

    /// Polls both ends every 250 ms until both gave the connections up, the instance's process
    /// changed, or ``SilentPathRecovery/bound`` passed.
    private static func watch(
        _ silence: SilentFlows, of index: Int, process: Int32, fleet: ServerFleet, client: PostgresClient, logger: Logger
    ) async -> SilentPathRecovery {
        var recovery = SilentPathRecovery(instance: index, connections: silence.clientPorts.count)
        let started = ContinuousClock.now, ports = silence.clientPorts.map { Int32($0) }
        while ContinuousClock.now - started < SilentPathRecovery.bound {
            if await fleet.processIdentifier(index) != process {
                recovery.restarted = true
                break
            }
            let elapsed = (ContinuousClock.now - started).inSeconds
            if recovery.instanceClosedAfter == nil, (try? await silence.stillOpen().isEmpty) == true {
                recovery.instanceClosedAfter = elapsed
            }
            if recovery.postgresEndedAfter == nil,
                let rows = try? await client.query("SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY(\(ports))", logger: logger).collect(),
                let left = try? rows.first?.decode(Int64.self), left == 0
            {
                recovery.postgresEndedAfter = elapsed
            }
            if recovery.instanceClosedAfter != nil, recovery.postgresEndedAfter != nil { break }
            try? await Task.sleep(for: .milliseconds(250))
        }
        return recovery
    }
}
