import NIOCore
import RevsyncRules

/// One committed change set as the requesting device receives it.
public struct LogEntry: Sendable {
    public let revision: Int64
    /// The exact JSON of the change set (the author's form for the device that made it).
    public let bytes: ByteBuffer

    package init(revision: Int64, bytes: ByteBuffer) {
        self.revision = revision
        self.bytes = bytes
    }
}

/// Part of the log after some revision, cut by the response limits.
public struct CatchUpPage: Sendable {
    public let entries: [LogEntry]
    /// The log holds more after the last entry.
    public let more: Bool
    /// Where the entries came from: "postgres", "redis" or "mixed" (a cache with holes filled from PostgreSQL).
    public var source: String = "postgres"

    package init(entries: [LogEntry], more: Bool, source: String = "postgres") {
        self.entries = entries
        self.more = more
        self.source = source
    }
}

/// Where catch-up reads committed change sets from: PostgreSQL, or a cache in front of it.
public protocol ChangeLog: Sendable {
    /// The head and horizon; a cache may answer with a head that lags behind.
    func state() async throws -> LogState
    /// The head and horizon as PostgreSQL has them.
    func authoritativeState() async throws -> LogState
    /// Entries after `revision` up to `head` (or beyond) in order, gap-free, at least one when any exist.
    /// - Parameter authored: the device's own entries the caller holds already (its change sets
    ///   this request committed), in the author's form; a store may skip reading them.
    func entries(
        after revision: Int64, through head: Int64, for device: Device, limits: CatchUpLimits, authored: [Int64: ByteBuffer]
    ) async throws -> CatchUpPage
    /// The author's form of the given revisions (acknowledgements the device asks for again).
    func authorEntries(_ revisions: [Int64], for device: Device) async throws -> [LogEntry]
    /// Called after a batch committed, with its entries in revision order, before any of its
    /// requests is answered; must not fail them.
    func didCommit(_ entries: [CommittedEntry]) async
}
