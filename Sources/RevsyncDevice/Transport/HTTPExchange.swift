/// One finished HTTP exchange of `HTTPSyncTransport`, for its `observer`.
/// Sizes are body bytes; "wire" is as sent (gzip where used), "raw" is the JSON.
public struct HTTPExchange: Sendable, Hashable {
    /// `/sync`, `/snapshot`, `/schema` or `/devices`.
    public var path: String
    /// Change sets the request carried (`/sync` only).
    public var changeSets: Int
    /// The seconds a `/sync` let the server hold it (a long-poll; after the transport's
    /// clamp), nil for every other exchange: its duration is mostly that wait, not latency.
    public var wait: Double?
    /// A download of the SQLite snapshot file (`/snapshot` with `Accept: application/vnd.sqlite3`):
    /// status 206 when it resumed an earlier one, nil when it was cut before its end.
    public var snapshotFile = false
    /// The HTTP status; nil when no answer arrived (connection failure, timeout, cancellation).
    public var status: Int?
    public var requestRawBytes = 0
    public var requestWireBytes = 0
    public var responseWireBytes = 0
    public var responseRawBytes = 0
    public var duration: Duration = .zero

    public init(path: String, changeSets: Int) {
        self.path = path
        self.changeSets = changeSets
    }
}
