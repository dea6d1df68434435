import Crypto
import Logging
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// What the server remembers of each device's seqs: the last one handled, and for
/// each the digest of the change set it named, so that a seq names one change set forever.
struct SeqLedger: Sendable {
    let database: Database
    let schema: DatasetSchema

    /// The device's temporary ids among `ids`, with what they became.
    static func mappings(_ ids: some Collection<Int64>, device: Device, on connection: PostgresConnection, logger: Logger) async throws
        -> [Int64: TemporaryIdMapping]
    {
        guard !ids.isEmpty else { return [:] }
        let list = Array(ids)
        let rows = try await connection.rows(
            "SELECT temp_id, entity, id FROM revsync_temp_ids WHERE device_id = \(device.id) AND temp_id = ANY(\(list))", logger)
        var known: [Int64: TemporaryIdMapping] = [:]
        for row in rows {
            let (temporaryId, entity, id) = try row.decode((Int64, String, Int64).self)
            known[temporaryId] = TemporaryIdMapping(entity: entity, id: id)
        }
        return known
    }

    /// SHA-256 of the change set's canonical form, with the device's mapped temporary ids resolved.
    func digest(_ changeSet: ChangeSet, known: [Int64: TemporaryIdMapping]) -> [UInt8] {
        let bytes = ChangeSetCanonicalForm.bytes(changeSet, schema: schema, permanentIds: known.mapValues(\.id))
        return Array(SHA256.hash(data: bytes))
    }

    /// The refusal of a change set sent under a seq that named another one.
    static func reused(seq: Int64, last: Int64, lowestTemporaryId: Int64, why: String) -> SyncError {
        var error = SyncError(
            .seqReused,
            "seq \(seq) \(why): renumber the pending change sets from seq \(seq) on to \(last + 1), \(last + 2), …, "
                + "and the temporary ids they create below \(lowestTemporaryId)",
            expected: last + 1, lowestTemporaryId: lowestTemporaryId)
        error.seq = seq
        return error
    }

    /// Checks a request's seqs before anything applies: they increase, the first new one
    /// is the next expected (`sequence_gap`), and every repeated one carries the change set
    /// it named before (`seq_reused`).
    func check(_ changeSets: [ChangeSet], device: Device) async throws {
        let seqs = changeSets.compactMap(\.seq)
        guard !seqs.isEmpty else { return }
        for (previous, next) in zip(seqs, seqs.dropFirst()) where next <= previous {
            throw SyncError(.invalidRequest, "change set seqs must increase within a request: \(next) follows \(previous)")
        }
        guard let first = seqs.first, first >= 1 else {
            throw SyncError(.invalidRequest, "seq starts at 1")
        }
        let logger = database.logger
        let schema = self.schema
        let ledger = self
        try await database.withConnection { connection in
            let rows = try await connection.rows("SELECT last_seq FROM revsync_devices WHERE id = \(device.id)", logger)
            guard let row = rows.first else { throw SyncError(.unauthorized, "the device no longer exists") }
            let last = try row.decode(Int64.self)
            var expected = last + 1
            for seq in seqs where seq > last {
                guard seq == expected else {
                    throw SyncError(.sequenceGap, "change set seq \(seq) skips ahead: the next expected seq is \(expected)", expected: expected)
                }
                expected += 1
            }
            let repeated = changeSets.filter { ($0.seq ?? .max) <= last }
            guard !repeated.isEmpty else { return }
            let ids = repeated.reduce(into: Set<Int64>()) { $0.formUnion(ChangeSetCanonicalForm.temporaryIdsToResolve($1, schema: schema)) }
            let known = try await Self.mappings(ids, device: device, on: connection, logger: logger)
            let stored = try await Self.digests(repeated.compactMap(\.seq), device: device, on: connection, logger: logger)
            for changeSet in repeated {
                guard let seq = changeSet.seq else { continue }
                if let problem = Self.mismatch(stored: stored[seq], sent: ledger.digest(changeSet, known: known)) {
                    let lowest = try await Self.lowestTemporaryId(device: device, on: connection, logger: logger)
                    throw Self.reused(seq: seq, last: last, lowestTemporaryId: lowest, why: problem)
                }
            }
        }
    }

    /// Why a repeated seq is not a retry of the change set it named, or nil when it is.
    /// - Parameter stored: nil when no outcome is kept (pruned); `.some(nil)` for an outcome from before digests.
    static func mismatch(stored: [UInt8]??, sent: [UInt8]) -> String? {
        switch stored {
        case .none: "was handled long ago and its outcome is no longer kept"
        case .some(.none): nil
        case .some(.some(let digest)): digest == sent ? nil : "already named a different change set"
        }
    }

    /// Stored digests by seq; a seq with an outcome from before digests maps to nil.
    static func digests(_ seqs: [Int64], device: Device, on connection: PostgresConnection, logger: Logger) async throws -> [Int64: [UInt8]?] {
        let rows = try await connection.rows(
            "SELECT seq, digest FROM revsync_outcomes WHERE device_id = \(device.id) AND seq = ANY(\(seqs))", logger)
        var digests: [Int64: [UInt8]?] = [:]
        for row in rows {
            let (seq, digest) = try row.decode((Int64, ByteBuffer?).self)
            digests[seq] = digest.map { Array($0.readableBytesView) }
        }
        return digests
    }

    /// The lowest temporary id the server has mapped for the device, 0 for none.
    static func lowestTemporaryId(device: Device, on connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        let rows = try await connection.rows("SELECT COALESCE(min(temp_id), 0) FROM revsync_temp_ids WHERE device_id = \(device.id)", logger)
        return try rows.first?.decode(Int64.self) ?? 0
    }
}
