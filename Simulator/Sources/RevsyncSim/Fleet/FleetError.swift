/// A server process or stack service the simulator drives did not do what it should;
/// the message names the instance or service and where its log is.
public struct FleetError: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
