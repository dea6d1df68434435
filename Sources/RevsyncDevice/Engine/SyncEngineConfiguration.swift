import Logging

/// How a `SyncEngine` behaves; the defaults suit an app.
public struct SyncEngineConfiguration: Sendable {
    /// Backoff for timeouts, connection errors and 5xx.
    public var retry = RetryPolicy()
    /// Bootstrap from the server's SQLite snapshot file (`GET /snapshot` as
    /// `application/vnd.sqlite3`) when the engine has a file of its own and the server
    /// offers one; false, or an in-memory engine, loads the JSON snapshot.
    public var sqliteSnapshots = true
    /// How long `run()` lets the server hold a catch-up open when the device has nothing
    /// to send (a long-poll: `POST /sync` with no change sets and `"wait"`). The server
    /// answers as soon as something is committed after the device's revision, or with
    /// nothing once the wait is over (it clamps the wait to its `REVSYNC_MAX_WAIT_SECONDS`,
    /// 60 by default); a local change cancels the request and is sent at once.
    /// `.zero` turns this off: `run()` then syncs every `pollInterval` instead.
    /// `HTTPSyncTransport` keeps the wait below its `readTimeout` and gives the request
    /// `requestTimeout` on top of it.
    public var wait: Duration = .seconds(25)
    /// How long `run()` waits for a local change before syncing anyway (to catch up) when it
    /// does not long-poll: `wait` is zero, or the server answered a long-poll at once (a
    /// server that does not hold requests), or refused it.
    public var pollInterval: Duration = .seconds(30)
    /// Most change sets sent in one request (halved on 413 as needed).
    public var maxChangeSetsPerRequest = 100
    /// Most creates, updates and deletes sent in one request, all change sets together
    /// (the server's `REVSYNC_MAX_OPERATIONS_PER_REQUEST` refuses more as `413`). A single
    /// change set over it is still sent, alone.
    public var maxOperationsPerRequest = 50_000
    /// Most creates, updates and deletes one local transaction may make: past it,
    /// `transaction` throws `DeviceError.tooManyOperations` and keeps nothing, since the
    /// server (`REVSYNC_MAX_OPERATIONS_PER_CHANGE_SET`) would reject the change set whole.
    /// Cascades do not count: a delete is one operation, however many records it removes.
    public var maxOperationsPerChangeSet = 10_000
    /// Most bytes of JSON one local transaction's change set may take: past it, `transaction`
    /// throws `DeviceError.changeSetTooManyBytes` and keeps nothing. The default is the
    /// server's default `REVSYNC_MAX_LOG_ENTRY_BYTES` (4 MiB), past which it rejects a change
    /// set as `invalid`; a change set past its request limits (`REVSYNC_MAX_BODY_BYTES`,
    /// `REVSYNC_MAX_INFLATED_BYTES`) would be refused even alone, as `413`, and stop every
    /// change set queued behind it. Keep it at most the server's limits.
    public var maxChangeSetBytes = 4 * 1024 * 1024
    /// Whether local transactions check the role's permissions from `GET /schema`
    /// (the default). Off models an app that lets users try anything: the
    /// server then rejects what the role may not do as `forbidden` and the
    /// corrective set restores it — the simulator uses this to exercise that path.
    public var checksPermissionsLocally = true
    public var logger = Logger(label: "revsync.device")
    /// Sleeps for backoff and polling; tests inject a fast or virtual clock.
    /// It should throw `CancellationError` when its task is cancelled.
    public var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    /// The jitter source: a number in 0..<1.
    public var random: @Sendable () -> Double = { Double.random(in: 0..<1) }
    /// Told the device's `maxRevision` each time a sync answer or a snapshot has been
    /// applied (its SQLite transaction committed), on the engine's actor: keep it quick.
    /// For measurements, such as the simulator's write-to-visible latency.
    public var revisionObserver: (@Sendable (Int64) -> Void)?

    public init() {}
}

/// What one `syncOnce()` did.
public struct SyncReport: Sendable, Hashable {
    /// `/sync` calls made (failed ones included).
    public var requests = 0
    /// Change sets sent, counting resends.
    public var sentChangeSets = 0
    /// `seq`s acknowledged.
    public var acknowledged: [Int64] = []
    /// Conflicts received (delivered on `conflicts()` as well).
    public var conflicts: [ConflictNotification] = []
    /// Committed change sets received (acknowledgements included).
    public var receivedChangeSets = 0
    /// The device's revision at the end.
    public var maxRevision: Int64 = 0
    /// Whether a snapshot was loaded (a new device, or the server asked for it).
    public var bootstrapped = false
    /// Retries after transient failures.
    public var retries = 0

    public init() {}

    /// Adds what a later part of the same sync did.
    mutating func absorb(_ later: SyncReport) {
        requests += later.requests
        sentChangeSets += later.sentChangeSets
        acknowledged += later.acknowledged
        conflicts += later.conflicts
        receivedChangeSets += later.receivedChangeSets
        maxRevision = max(maxRevision, later.maxRevision)
        bootstrapped = bootstrapped || later.bootstrapped
        retries += later.retries
    }
}
