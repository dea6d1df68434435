/// A soak run could not be set up or carried out (not a verdict violation:
/// those are `VerdictCheck`s). The message says what to fix.
public struct SoakError: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
