import NIOCore
import RevsyncGzip
import RevsyncRules

/// The form a response will carry its change sets in.
public enum EntryForm: Sendable, Hashable {
    /// JSON bytes.
    case plain
    /// Compressed once at commit where the store has that (the answer is gzip); plain otherwise.
    case deflated
}

/// One committed change set as the requesting device receives it.
public struct LogEntry: Sendable {
    public enum Body: Sendable {
        /// The exact JSON of the change set.
        case plain(ByteBuffer)
        /// The same JSON compressed on its own, to be joined into a gzip answer as is.
        case deflated(DeflateFragment)
        /// This change set and the next ones of an aligned run, joined by commas and compressed
        /// together (far smaller than apart); the run's other entries are `inRun`.
        case deflatedRun(DeflateFragment)
        /// The separator and this change set (or the run it starts, like `deflatedRun`),
        /// compressed with the change set before it as the dictionary: far smaller than alone,
        /// but valid only right after that change set's public form.
        case chained(DeflateFragment)
        /// Sent within the run an earlier entry carries.
        case inRun

        /// The size of the JSON, however it is held (a run's whole size on its first entry).
        public var size: Int {
            switch self {
            case .plain(let bytes): bytes.readableBytes
            case .deflated(let fragment), .deflatedRun(let fragment): fragment.length
            // Without its leading comma.
            case .chained(let fragment): fragment.length - 1
            case .inRun: 0
            }
        }

        /// The bytes held, compressed or not: about what the entry adds to a gzip answer.
        public var heldBytes: Int {
            switch self {
            case .plain(let bytes): bytes.readableBytes
            case .deflated(let fragment), .deflatedRun(let fragment), .chained(let fragment): fragment.deflated.readableBytes
            case .inRun: 0
            }
        }
    }

    public let revision: Int64
    /// The change set (the author's form for the device that made it).
    public let body: Body

    package init(revision: Int64, bytes: ByteBuffer) {
        self.init(revision: revision, body: .plain(bytes))
    }

    package init(revision: Int64, body: Body) {
        self.revision = revision
        self.body = body
    }

    /// The size of the JSON, however it is held: what the page limits count.
    public var size: Int { body.size }
}

/// Part of the log after some revision, cut by the response limits.
public struct CatchUpPage: Sendable {
    public let entries: [LogEntry]
    /// The log holds more after the last entry.
    public let more: Bool
    /// Where the entries came from: "postgres", "redis" or "mixed" (a cache with holes filled from PostgreSQL).
    public var source: String = "postgres"
    /// The devices that made the entries (a superset will do), nil when the store did not say:
    /// a page read for nobody in particular is the answer of every device not among them
    /// (woken waiters share one read).
    public let authors: Set<Int64>?

    package init(entries: [LogEntry], more: Bool, source: String = "postgres", authors: Set<Int64>? = nil) {
        self.entries = entries
        self.more = more
        self.source = source
        self.authors = entries.isEmpty ? [] : authors
    }
}

/// Where catch-up reads committed change sets from: PostgreSQL, or a cache in front of it.
public protocol ChangeLog: Sendable {
    /// The head and horizon; a cache may answer with a head that lags behind.
    func state() async throws -> LogState
    /// `state()`, or what this instance saw of it a moment ago (a cache's `stateFreshFor`):
    /// what a request that came that much earlier would have been told.
    func recentState() async throws -> LogState
    /// The head and horizon as PostgreSQL has them.
    func authoritativeState() async throws -> LogState
    /// Entries after `revision` up to `head` (or beyond) in order, gap-free, at least one when
    /// any exist; reading stops where the limits cut the page.
    /// - Parameter own: revisions the caller knows are the device's own (it just committed them).
    func entries(
        after revision: Int64, through head: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm, own: Set<Int64>
    ) async throws -> CatchUpPage
    /// The state and the page after `revision` through that head, read together (a request
    /// without change sets); the caller checks its `maxRevision` against the state afterwards.
    func catchUp(after revision: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm) async throws -> (state: LogState, page: CatchUpPage)
    /// The author's form of the given revisions (acknowledgements the device asks for again).
    func authorEntries(_ revisions: [Int64], for device: Device) async throws -> [LogEntry]
    /// Called after a batch committed, with its entries in revision order, before any of its
    /// requests is answered; must not fail them. Returns once this instance's reads find the
    /// entries; what it returns ends once every instance's do.
    func didCommit(_ entries: [CommittedEntry]) async -> CommitPublication
}

extension ChangeLog {
    public func recentState() async throws -> LogState { try await state() }

    /// Two reads: the state, then the page through its head.
    public func catchUp(
        after revision: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm
    ) async throws -> (state: LogState, page: CatchUpPage) {
        let state = try await state()
        guard revision >= state.horizon, revision < state.head else { return (state, CatchUpPage(entries: [], more: false)) }
        return (state, try await entries(after: revision, through: state.head, for: device, limits: limits, form: form, own: []))
    }
}
