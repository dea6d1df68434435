/// The verdict could not be gathered (as opposed to a check that failed).
public struct VerdictError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
