/// Where a link's requests go: the device's server, and another instance for split requests.
struct LinkTargets: Sendable {
    var host: String
    var port: Int
    /// Another instance of the server (``RequestFate/split``), if there is one.
    var splitPort: Int?
    var onSplit: (@Sendable (SplitExchange) -> Void)?
}
