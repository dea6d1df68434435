/// A store that cannot do its work: nothing the device did wrong. The HTTP layer answers
/// `unavailable` (503, try again) or `internal` (500, see the log).
public enum StoreError: Error, Sendable, CustomStringConvertible {
    /// The database or cache cannot be reached or did not answer in time.
    case unavailable(String)
    /// The stored state is not what the server wrote (an unmigrated database, a missing row).
    case inconsistent(String)

    public var description: String {
        switch self {
        case .unavailable(let message), .inconsistent(let message): message
        }
    }
}
