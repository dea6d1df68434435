import Logging

/// How a `SyncEngine` behaves; the defaults suit an app.
public struct SyncEngineConfiguration: Sendable {
    /// Backoff for timeouts, connection errors and 5xx.
    public var retry = RetryPolicy()
    /// How long `run()` waits for a local change before syncing anyway (to catch up).
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
}
