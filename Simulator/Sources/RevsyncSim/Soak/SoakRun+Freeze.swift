import Foundation

extension SoakRun {
    /// Stops every PostgreSQL process for ``FrozenPostgres/span`` (`PostgresProcesses`), asks each
    /// instance `GET /ready` ``FrozenPostgres/probesPerInstance`` times a second apart from the
    /// freeze on, then continues PostgreSQL and records when each probe was answered.
    func freezePostgres(fleet: ServerFleet) async throws {
        let kind = FaultKind.postgresFreezes.rawValue
        let processes = try await PostgresProcesses.of(databaseURL: fleet.configuration.databaseURL, logger: logger)
        let span = FrozenPostgres.span, perInstance = FrozenPostgres.probesPerInstance
        let urls = (0..<fleet.count).map { fleet.baseURL($0) + "/ready" }
        processes.stop()
        let frozenAt = ContinuousClock.now
        note(kind, "every PostgreSQL process stopped (SIGSTOP) for \(format(span)), as when its storage stalls or its VM is paused; "
            + "each instance asked GET /ready \(perInstance) times, a second apart")
        // Probes that the servers leave waiting must not hold the thaw back: they run apart.
        let probing = Task {
            await withTaskGroup(of: FrozenPostgres.Probe.self) { group in
                for (instance, url) in urls.enumerated() {
                    for turn in 0..<perInstance {
                        group.addTask {
                            try? await Task.sleep(until: frozenAt + .seconds(turn), clock: .continuous)
                            let sentAfter = (ContinuousClock.now - frozenAt).inSeconds
                            let answer = await ReadinessProbe.answer(url, timeout: span + .seconds(30))
                            return FrozenPostgres.Probe(instance: instance, sentAfter: sentAfter, answer: answer)
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        // Not cancellable (the fault runs in a task of its own): a PostgreSQL left stopped would outlast the run.
        try? await Task.sleep(until: frozenAt + span, clock: .continuous)
        processes.resume()
        let frozenFor = (ContinuousClock.now - frozenAt).inSeconds
        let freeze = FrozenPostgres(frozenFor: frozenFor, probes: await probing.value)
        frozenPostgres.append(freeze)
        let answered = freeze.probes.count - freeze.unanswered.count
        let slowest = freeze.probes.filter { $0.answer.status != nil }.map(\.answeredAfter).max() ?? 0
        note("postgres_thawed", "PostgreSQL continued after \(String(format: "%.1f", frozenFor)) s; \(answered) of \(freeze.probes.count) "
            + "probes answered while it was frozen (\(FrozenPostgres.describe(freeze.probes))), the slowest after \(String(format: "%.1f", slowest)) s")
    }
}

extension FrozenPostgres {
    /// How the probes were answered, by kind: "2 given up, 1 no connection".
    static func describe(_ probes: [Probe]) -> String {
        var kinds: [String: Int] = [:]
        for probe in probes { kinds[kind(of: probe), default: 0] += 1 }
        return kinds.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
    }

    static func kind(of probe: Probe) -> String {
        guard let status = probe.answer.status else { return "not answered" }
        let body = probe.answer.body ?? ""
        if body.contains("did not answer within") { return "connection given up" }
        if body.contains("no PostgreSQL connection became free") { return "no connection free" }
        return "status \(status)"
    }
}
