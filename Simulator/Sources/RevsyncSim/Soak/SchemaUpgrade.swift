import Foundation
import Logging
import PostgresNIO

/// The soak's rolling schema upgrade (`schema-upgrade`): the run's schema with one more
/// nullable attribute, `notes.mood`, at the next version, migrated while the devices work and
/// rolled out to the instances one at a time. Devices learn it from the answers (notes created
/// by upgraded instances carry it) and then write it; an instance not upgraded yet must ask for
/// those change sets again (`503`), never reject them.
enum SchemaUpgrade {
    static let entity = "notes"
    static let attribute = "mood"
    /// Between two instances' restarts: long enough for devices to meet both schemas.
    static let pause: Duration = .seconds(5)

    /// Writes the upgraded schema next to the run's files; returns its path and version.
    static func write(from path: String, into directory: String) throws -> (path: String, version: Int) {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        guard var json = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let version = json["version"] as? Int, var entities = json["entities"] as? [[String: Any]],
            let index = entities.firstIndex(where: { $0["name"] as? String == entity })
        else { throw SoakError("\(path): a schema with a version and an entity \"\(entity)\" is needed for schema-upgrade") }
        var attributes = entities[index]["attributes"] as? [[String: Any]] ?? []
        attributes.append(["name": attribute, "type": "string", "nullable": true])
        entities[index]["attributes"] = attributes
        json["entities"] = entities
        json["version"] = version + 1
        let target = directory + "/schema-v\(version + 1).json"
        try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted]).write(to: URL(fileURLWithPath: target))
        return (target, version + 1)
    }

    /// What PostgreSQL says of the upgrade: change sets committed with the new attribute, the
    /// records holding it now, and change sets rejected for naming it (each one an edit an
    /// instance not upgraded yet undid).
    struct Audit: Sendable, Equatable {
        /// Committed change sets (in the log) that gave the attribute a value: what shows that
        /// devices learned the schema. The records alone may not: the soak's notes hang on its
        /// hot players, and an admin's delete of a player takes its notes with it (seed 431 wrote
        /// 370 moods, and the last of them went with player 7).
        var written: Int64
        var held: Int64
        var rejected: Int64
    }

    static func audit(_ databaseURL: String, logger: Logger) async throws -> Audit {
        try await VerdictDatabase.withDatabase(url: databaseURL, logger: logger) { database in
            try await database.inSnapshot { connection in
                let written = try await connection.query(
                    """
                    SELECT count(*) FROM revsync_log AS l
                    WHERE EXISTS (SELECT 1 FROM jsonb_each(l.body::jsonb -> \(entity)::text -> 'attributes') AS a(id, value)
                                  WHERE a.value ->> \(attribute)::text IS NOT NULL)
                    """, logger: logger
                ).collect().first?.decode(Int64.self) ?? 0
                let held = try await connection.query(
                    "SELECT count(*) FROM \(unescaped: entity) WHERE \(unescaped: attribute) IS NOT NULL", logger: logger
                ).collect().first?.decode(Int64.self) ?? 0
                // The validator's words: `unknown attribute "mood" of notes` (escaped inside the reason's JSON).
                let rejected = try await connection.query(
                    """
                    SELECT count(*) FROM revsync_outcomes
                    WHERE strpos(reason, 'unknown attribute') > 0 AND strpos(reason, \(attribute)) > 0
                    """, logger: logger
                ).collect().first?.decode(Int64.self) ?? 0
                return Audit(written: written, held: held, rejected: rejected)
            }
        }
    }
}
