import Foundation

extension SoakRun {
    /// Requests asked of each instance at once to make its pool want more connections than
    /// PostgreSQL lets it have.
    static let refusalBurst = 24
    /// Time between the probes of one instance while PostgreSQL refuses.
    static let refusalProbeInterval: Duration = .seconds(2)
    /// How long a probe may wait: past the servers' 10 s wait for a connection, so that their
    /// own 503 is what a pool that has stopped serving answers.
    static let refusalProbeTimeout: Duration = .seconds(15)

    /// PostgreSQL lets the servers' role keep the connections it has and refuses it more for
    /// `span`: the pools, asked for more by a burst of `/ready`, must go on serving from the
    /// connections they hold. Probes of `/ready` one at a time record that they do.
    func refuseConnections(fleet: ServerFleet, for span: Duration) async throws {
        let kind = FaultKind.postgresRefuses.rawValue
        guard let role = URLComponents(string: fleet.configuration.databaseURL)?.user else {
            throw SoakError("the servers' database URL names no user, so no role can be limited")
        }
        let stack = stackControl()
        let open = try await stack.connections(of: role)
        // A limit of 0 would refuse the connections the pools hold when they reconnect too.
        let limit = max(open, 1)
        try await stack.limitConnections(of: role, to: limit)
        note(kind, "PostgreSQL lets role \(role) keep \(limit) connection(s) and refuses it more for \(format(span)); "
            + "\(Self.refusalBurst) /ready at once to each instance, then one every \(format(Self.refusalProbeInterval))")
        let answers = await probeWhileRefused(fleet: fleet, for: span)
        do {
            try await stack.limitConnections(of: role, to: nil)
        } catch {
            // Left in place, the limit would outlast the run: say so loudly.
            note("error", "the connection limit of role \(role) could not be lifted: \(error)")
            throw error
        }
        refusalAnswers += answers
        let served = answers.filter { $0.status == 200 }
        let slowest = answers.map(\.seconds).max() ?? 0
        note("postgres_accepts", "role \(role) may open connections again; \(served.count) of \(answers.count) probes answered 200 "
            + "while refused, the slowest in \(String(format: "%.2f", slowest)) s")
    }

    /// The burst, then a probe of each instance every `refusalProbeInterval` until `span` is over.
    private func probeWhileRefused(fleet: ServerFleet, for span: Duration) async -> [ReadinessAnswer] {
        let urls = (0..<fleet.count).map { fleet.baseURL($0) + "/ready" }
        let end = ContinuousClock.now + span
        await withTaskGroup(of: Void.self) { group in
            for url in urls {
                for _ in 0..<Self.refusalBurst {
                    group.addTask { _ = await ReadinessProbe.answer(url, timeout: Self.refusalProbeTimeout) }
                }
            }
        }
        var answers: [ReadinessAnswer] = []
        while ContinuousClock.now < end {
            let round = ContinuousClock.now
            answers += await withTaskGroup(of: ReadinessAnswer.self) { group in
                for url in urls { group.addTask { await ReadinessProbe.answer(url, timeout: Self.refusalProbeTimeout) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            try? await Task.sleep(until: round + Self.refusalProbeInterval, clock: .continuous)
        }
        return answers
    }
}
