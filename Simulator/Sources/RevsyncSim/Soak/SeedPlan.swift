import RevsyncLink
import RevsyncWire

/// The dataset a soak starts from: about `target` records over the default
/// schema (the case study's data model), in dependency order, each with a
/// temporary id of the seeding device. Pure and seeded: the same seed and size
/// give the same records.
///
/// Proportions per 100,000 records: 10 leagues, 30 seasons, 200 teams, 5,000
/// users and players, 1,000 screens with 10 items each, 10,000 screen instances
/// with 5 items each, 2,000 trainings, 10,000 attendances, 1,000 matches and
/// 5,000 notes.
struct SeedPlan {
    struct Row {
        var entity: String
        var temporaryId: Int64
        var attributes: Attributes
    }

    private(set) var rows: [Row] = []
    private var nextTemporaryId: Int64 = -1
    private var random: SplitMix64

    init(target: Int, seed: UInt64) {
        random = SplitMix64(seed: seed ^ 0x5EED)
        let scale = Double(max(target, 100)) / 100_000
        func count(_ per100k: Double, minimum: Int = 1) -> Int { max(minimum, Int((per100k * scale).rounded())) }

        let leagues = (0..<count(10)).map { n in
            add("leagues", ["name": .string("League \(n + 1)"), "country": .string(pick(Self.countries))])
        }
        let seasons = (0..<count(30, minimum: 2)).map { n in
            add("seasons", [
                "league_id": .integer(leagues[n % leagues.count]), "name": .string("Season \(2020 + n % 7)"),
                "starts_on": .string("20\(20 + n % 7)-08-01T00:00:00Z"), "ends_on": .string("20\(21 + n % 7)-05-31T00:00:00Z"),
            ])
        }
        let teams = (0..<count(200, minimum: 4)).map { n in
            add("teams", [
                "league_id": .integer(leagues[n % leagues.count]), "name": .string("Team \(n + 1)"),
                "city": .string(pick(Self.cities)),
            ])
        }
        let users = (0..<count(5_000, minimum: 4)).map { n in
            add("users", [
                "first_name": .string(pick(Self.firstNames)), "last_name": .string(pick(Self.lastNames)),
                "date_of_birth": .string("19\(80 + n % 20)-0\(1 + n % 9)-1\(n % 10)T00:00:00Z"),
                "email": .string("user\(n + 1)@example.org"),
            ])
        }
        let players = users.enumerated().map { n, user in
            add("players", [
                "user_id": .integer(user), "team_id": .integer(teams[n % teams.count]),
                "number": .integer(Int64(1 + n % 99)), "position": .string(pick(Self.positions)),
            ])
        }
        let screens = (0..<count(1_000, minimum: 2)).map { n in
            add("screens", [
                "team_id": .integer(teams[n % teams.count]), "name": .string("Screen \(n + 1)"), "sort_order": .integer(Int64(n % 10)),
            ])
        }
        var itemsByScreen: [[Int64]] = []
        for screen in screens {
            itemsByScreen.append((0..<10).map { k in
                add("screen_items", [
                    "screen_id": .integer(screen), "label": .string("Item \(k + 1)"), "kind": .string(pick(Self.kinds)),
                    "sort_order": .integer(Int64(k)),
                ])
            })
        }
        let instanceCount = count(10_000, minimum: 2)
        for n in 0..<instanceCount {
            let screenIndex = n % screens.count
            let instance = add("screen_instances", [
                "screen_id": .integer(screens[screenIndex]), "player_id": .integer(players[n % players.count]),
                "date": .string("2026-0\(1 + n % 9)-\(10 + n % 18)T10:00:00Z"), "comment": .string("Session \(n + 1)"),
            ])
            for k in 0..<5 {
                add("screen_instance_items", [
                    "screen_instance_id": .integer(instance), "screen_item_id": .integer(itemsByScreen[screenIndex][k]),
                    "numeric_value": .double(Double(random.next() % 1000) / 10), "text_value": .null,
                ])
            }
        }
        let trainings = (0..<count(2_000, minimum: 2)).map { n in
            add("trainings", [
                "team_id": .integer(teams[n % teams.count]), "starts_at": .string("2026-0\(1 + n % 9)-0\(1 + n % 9)T18:00:00Z"),
                "location": .string(pick(Self.cities)), "notes": .null,
            ])
        }
        for n in 0..<count(10_000, minimum: 2) {
            add("attendances", [
                "training_id": .integer(trainings[n % trainings.count]), "player_id": .integer(players[n % players.count]),
                "present": .bool(random.next() % 4 != 0),
            ])
        }
        for n in 0..<count(1_000, minimum: 2) {
            add("matches", [
                "season_id": .integer(seasons[n % seasons.count]), "home_team_id": .integer(teams[n % teams.count]),
                "away_team_id": .integer(teams[(n + 1) % teams.count]), "starts_at": .string("2026-0\(1 + n % 9)-1\(n % 10)T15:00:00Z"),
                "home_score": .null, "away_score": .null,
            ])
        }
        for n in 0..<count(5_000, minimum: 2) {
            add("notes", [
                "author_id": .integer(users[n % users.count]), "player_id": .integer(players[(n * 7) % players.count]),
                "body": .string("Note \(n + 1)"), "pinned": .bool(n % 10 == 0),
            ])
        }
    }

    /// The rows as change sets of at most `size` records, in order.
    func changeSets(ofSize size: Int, firstSeq: Int64 = 1) -> [ChangeSet] {
        stride(from: 0, to: rows.count, by: size).enumerated().map { index, start in
            var changeSet = ChangeSet(seq: firstSeq + Int64(index))
            for row in rows[start..<min(start + size, rows.count)] {
                changeSet[row.entity].create.append(row.temporaryId)
                changeSet[row.entity].attributes[row.temporaryId] = row.attributes
            }
            return changeSet
        }
    }

    @discardableResult
    private mutating func add(_ entity: String, _ attributes: Attributes) -> Int64 {
        let id = nextTemporaryId
        nextTemporaryId -= 1
        rows.append(Row(entity: entity, temporaryId: id, attributes: attributes))
        return id
    }

    private mutating func pick(_ values: [String]) -> String {
        values[Int(random.next() % UInt64(values.count))]
    }

    static let countries = ["UK", "DE", "FR", "ES", "IT", "NL", "CN", "JP", "BR", "US"]
    static let cities = ["Leeds", "Lyon", "Porto", "Kyoto", "Recife", "Austin", "Graz", "Turin", "Suzhou", "Ghent"]
    static let firstNames = ["Ana", "Li", "Sam", "Noor", "Jon", "Mia", "Ravi", "Eva", "Tom", "Yui"]
    static let lastNames = ["Silva", "Wang", "Berg", "Okafor", "Rossi", "Kim", "Novak", "Diaz", "Moreau", "Sato"]
    static let positions = ["GK", "DF", "MF", "FW"]
    static let kinds = ["number", "text", "scale", "check"]
}
