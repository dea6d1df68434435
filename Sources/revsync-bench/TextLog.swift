import Foundation
import Logging
import PostgresNIO
import RevsyncLink
import RevsyncRules
import RevsyncServer
import RevsyncWire

/// A small log of text-like change sets: each creates a note of about `entryBytes` of words
/// from a small vocabulary, by an author about a player, drawn from a generator seeded by the
/// revision. The main log's notes are one letter repeated, which compresses to a few bytes a
/// change set however the answer is cut; here words repeat across change sets but not in the
/// same order, which is what compressing change sets apart loses against compressing the answer whole.
struct TextLog {
    static let database = "revsync_bench_text"
    static let revisions: Int64 = 2_000
    /// Fixed, so that every run measures the same log.
    static let seed: UInt64 = 0x7265_7673_796E_6374
    static let vocabulary = [
        "the", "a", "and", "to", "of", "in", "on", "with", "after", "before", "during", "again", "very", "too", "not",
        "good", "better", "tired", "quick", "slow", "strong", "late", "early", "sharp", "calm", "focused",
        "player", "coach", "team", "ball", "pass", "passes", "shot", "shots", "sprint", "sprints", "drill", "drills",
        "defence", "attack", "press", "pressing", "tackle", "header", "cross", "corner", "keeper", "goal", "goals",
        "left", "right", "wing", "midfield", "training", "session", "match", "half", "minute", "minutes", "warm-up",
        "stretching", "knee", "ankle", "hamstring", "recovery", "rest", "plan", "next", "week", "improve", "needs",
        "kept", "lost", "won", "scored", "missed", "moved", "watched", "talked", "about", "position", "shape",
    ]

    let entryBytes: Int

    /// Revision `revision`'s change set: one note, its text and ids drawn from the revision's own generator.
    func changeSet(_ revision: Int64) -> AppliedChangeSet {
        var random = SplitMix64(seed: Self.seed ^ UInt64(revision))
        // As the main log: about `entryBytes` a change set, of which ~200 are the entry around the text.
        let target = max(40, entryBytes - 200)
        var text = ""
        while text.utf8.count < target {
            let words = 5 + random.below(12)
            for index in 0..<words {
                var word = Self.vocabulary[random.below(Self.vocabulary.count)]
                if index == 0 { word = word.prefix(1).uppercased() + word.dropFirst() }
                // Numbers (a minute, a count) now and then, as notes have them.
                if random.below(8) == 0 { word += " " + String(random.below(90) + 1) }
                text += (index == 0 ? "" : " ") + word
            }
            text += random.below(5) == 0 ? "! " : ". "
        }
        var applied = AppliedChangeSet(seq: nil, types: ["notes"])
        applied.create(
            "notes",
            CreatedRecord(
                id: revision, temporaryId: -1,
                values: [
                    "author_id": .integer(Int64(1 + random.below(40))), "player_id": .integer(Int64(1 + random.below(400))),
                    "body": .string(String(text.dropLast())), "pinned": .bool(random.below(10) == 0),
                ]))
        return applied
    }

    /// Writes the log straight into the migrated database at `url`, as `Bench.loadLog` writes the
    /// main one: the log rows, by the admin device, and the head. The change sets differ, so
    /// they are encoded here and bound as arrays rather than templated in SQL.
    func load(into url: String, schema: DatasetSchema, logger: Logger) async throws {
        var revisions: [Int64] = [], bodies: [String] = [], authorBodies: [String] = []
        for revision in 1...Self.revisions {
            let applied = changeSet(revision)
            revisions.append(revision)
            bodies.append(Self.stamped(LogEntryEncoder.encode(applied, schema: schema, author: false), revision))
            authorBodies.append(Self.stamped(LogEntryEncoder.encode(applied, schema: schema, author: true), revision))
        }
        try await SQL.withConnection(url, logger: logger) { connection in
            try await connection.run(
                """
                INSERT INTO revsync_log (revision, device_id, seq, body, author_body)
                SELECT r, (SELECT id FROM revsync_devices WHERE role = 'admin' LIMIT 1), NULL, b, a
                FROM unnest(\(revisions)::bigint[], \(bodies)::text[], \(authorBodies)::text[]) AS t(r, b, a)
                """, logger)
            try await connection.run("UPDATE revsync_head SET head = \(Self.revisions)", logger)
        }
    }

    /// The encoded entry with its revision placeholders replaced, as the server stores it.
    private static func stamped(_ encoded: [UInt8], _ revision: Int64) -> String {
        let digits = Array(String(revision).utf8)
        return String(decoding: encoded.flatMap { $0 == JSONWriter.placeholder ? digits : [$0] }, as: UTF8.self)
    }
}

extension SplitMix64 {
    /// A number in `0..<bound`, by modulo rather than `Int.random(in:using:)`, whose way of
    /// drawing from the generator the standard library does not promise to keep: the bench's
    /// synthetic data must be the same in every run and Swift release.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
