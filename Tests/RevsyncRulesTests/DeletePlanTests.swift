import RevsyncRules
import RevsyncWire
import Testing

/// Records held in memory, looked up the way the Postgres store does: level by level.
private struct MemoryStore {
    /// Reference values per record.
    var records: [RecordKey: [String: Int64]] = [:]

    mutating func insert(_ entity: String, _ id: Int64, _ references: [String: Int64] = [:]) {
        records[RecordKey(entity, id)] = references
    }

    /// Runs `plan` to completion: every frontier's dependents over every relation of the schema.
    func complete(
        _ plan: inout DeletePlan, schema: DatasetSchema, role: String
    ) -> Result<[(record: RecordKey, attributes: [String])], ConflictReason> {
        do {
            try plan.complete(
                relations: schema.references(to:),
                permissions: { schema.entity(named: $0)?.permissions(for: role) ?? .none }
            ) { relation, parentIds in
                records.keys.sorted().compactMap { key -> (child: Int64, parent: Int64)? in
                    guard key.entity == relation.child, let parent = records[key]?[relation.attribute], parentIds.contains(parent)
                    else { return nil }
                    return (key.id, parent)
                }
            }
        } catch {
            return .failure(error as? ConflictReason ?? ConflictReason(code: .invalid, entity: nil, id: nil, message: "\(error)"))
        }
        return plan.finish()
    }
}

@Suite struct DeletePlanTests {
    let schema: DatasetSchema

    init() throws {
        schema = try Fixtures.deleteRulesSchema()
    }

    /// leagues 1 ← teams 5, 6; teams 5 ← players 10, 11; teams 6 ← players 12;
    /// players 10 ← notes 100; players 12 ← notes 101; users 7 ← players 10, 12 and notes 101 (author).
    private var store: MemoryStore {
        var store = MemoryStore()
        store.insert("leagues", 1)
        store.insert("teams", 5, ["league_id": 1])
        store.insert("teams", 6, ["league_id": 1])
        store.insert("users", 7)
        store.insert("players", 10, ["team_id": 5, "user_id": 7])
        store.insert("players", 11, ["team_id": 5])
        store.insert("players", 12, ["team_id": 6, "user_id": 7])
        store.insert("notes", 100, ["player_id": 10])
        store.insert("notes", 101, ["player_id": 12, "author_id": 7])
        return store
    }

    @Test func cascadeDeletesChildrenOverTwoLevels() throws {
        var plan = DeletePlan(roots: [RecordKey("teams", 5)])
        let clears = try store.complete(&plan, schema: schema, role: "admin").get()
        #expect(Set(plan.deleted) == [
            RecordKey("teams", 5), RecordKey("players", 10), RecordKey("players", 11), RecordKey("notes", 100),
        ])
        #expect(plan.deleted.first == RecordKey("teams", 5))
        #expect(clears.isEmpty)
    }

    @Test func cascadeIsForbiddenWhenTheRoleMayNotDeleteTheChild() {
        // member may delete teams but not players.
        var plan = DeletePlan(roots: [RecordKey("teams", 5)])
        let reason = store.complete(&plan, schema: schema, role: "member").failure
        #expect(reason?.code == .forbidden)
        #expect(reason?.entity == "players")
        #expect(reason?.id == 10)
    }

    @Test func cascadeWithoutChildrenNeedsNoPermissionOnThem() throws {
        var plan = DeletePlan(roots: [RecordKey("teams", 9)])
        #expect(try store.complete(&plan, schema: schema, role: "member").get().isEmpty)
        #expect(plan.deleted == [RecordKey("teams", 9)])
    }

    @Test func restrictRefusesWhileAChildSurvives() {
        var plan = DeletePlan(roots: [RecordKey("leagues", 1), RecordKey("teams", 5)])  // teams 6 survives
        let reason = store.complete(&plan, schema: schema, role: "admin").failure
        #expect(reason?.code == .reference)
        #expect(reason?.entity == "leagues")
        #expect(reason?.id == 1)
        #expect(reason?.message.contains("teams 6") == true)
    }

    @Test func restrictAllowsTheDeleteWhenEveryChildIsDeletedToo() throws {
        var plan = DeletePlan(roots: [RecordKey("leagues", 1), RecordKey("teams", 5), RecordKey("teams", 6)])
        _ = try store.complete(&plan, schema: schema, role: "admin").get()
        #expect(Set(plan.deleted).isSuperset(of: [RecordKey("leagues", 1), RecordKey("players", 12), RecordKey("notes", 101)]))
    }

    @Test func restrictChildCascadedAtALaterLevelDoesNotBlockTheDelete() throws {
        // Default schema: matches → teams (restrict), matches → seasons (cascade), seasons → leagues (cascade).
        // Deleting teams 1 and leagues 1 meets match 50 first through its restricting home team, and
        // only one level later deletes it through seasons 3.
        let schema = try Fixtures.defaultSchema()
        var store = MemoryStore()
        store.insert("leagues", 1)
        store.insert("leagues", 2)
        store.insert("teams", 1, ["league_id": 1])
        store.insert("teams", 2, ["league_id": 2])
        store.insert("seasons", 3, ["league_id": 1])
        store.insert("matches", 50, ["season_id": 3, "home_team_id": 1, "away_team_id": 2])

        var plan = DeletePlan(roots: [RecordKey("teams", 1), RecordKey("leagues", 1)])
        #expect(store.complete(&plan, schema: schema, role: "admin").success != nil)
        #expect(Set(plan.deleted) == [
            RecordKey("teams", 1), RecordKey("leagues", 1), RecordKey("seasons", 3), RecordKey("matches", 50),
        ])

        var teamOnly = DeletePlan(roots: [RecordKey("teams", 1)])
        let reason = store.complete(&teamOnly, schema: schema, role: "admin").failure
        #expect(reason?.code == .reference)
        #expect(reason?.entity == "teams")
        #expect(reason?.id == 1)
    }

    @Test func setNullClearsTheReferenceOfSurvivingChildrenOnly() throws {
        // Deleting users 7 clears players 10 and 12 and notes 101; players 12 is deleted as well, and with it notes 101.
        var plan = DeletePlan(roots: [RecordKey("users", 7), RecordKey("players", 12)])
        let clears = try store.complete(&plan, schema: schema, role: "admin").get()
        #expect(clears.map(\.record) == [RecordKey("players", 10)])
        #expect(clears.first?.attributes == ["user_id"])
        #expect(Set(plan.deleted) == [RecordKey("users", 7), RecordKey("players", 12), RecordKey("notes", 101)])
    }

    @Test func setNullNeedsNoDeletePermission() throws {
        var plan = DeletePlan(roots: [RecordKey("users", 7)])
        let clears = try store.complete(&plan, schema: schema, role: "member").get()
        #expect(Set(clears.map(\.record)) == [RecordKey("players", 10), RecordKey("players", 12), RecordKey("notes", 101)])
        #expect(clears.first { $0.record == RecordKey("notes", 101) }?.attributes == ["author_id"])
        #expect(plan.deleted == [RecordKey("users", 7)])
    }

    @Test func recordReachedTwiceIsDeletedOnce() throws {
        var plan = DeletePlan(roots: [RecordKey("teams", 5), RecordKey("players", 10)])
        _ = try store.complete(&plan, schema: schema, role: "admin").get()
        #expect(plan.deleted.count == Set(plan.deleted).count)
        #expect(plan.deleted.filter { $0 == RecordKey("players", 10) }.count == 1)
    }

    @Test func frontierIsHandedOutOnce() {
        var plan = DeletePlan(roots: [RecordKey("teams", 5), RecordKey("teams", 6), RecordKey("users", 7)])
        #expect(plan.takeFrontier() == ["teams": [5, 6], "users": [7]])
        #expect(plan.takeFrontier().isEmpty)
    }
}
