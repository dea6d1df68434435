/// Exponential backoff with jitter for transient sync failures.
public struct RetryPolicy: Sendable, Hashable {
    /// The base delay of the first retry.
    public var initialDelay: Duration
    /// No delay exceeds this.
    public var maximumDelay: Duration
    public var multiplier: Double
    /// Attempts per `syncOnce()` before its error is thrown; nil: retry forever.
    /// (`run()` keeps going after a round gives up, from the first delay again.)
    public var maxAttempts: Int?

    public init(
        initialDelay: Duration = .milliseconds(250), maximumDelay: Duration = .seconds(30),
        multiplier: Double = 2, maxAttempts: Int? = 8
    ) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.multiplier = multiplier
        self.maxAttempts = maxAttempts
    }

    /// The pause before retry number `attempt` (1 for the first retry):
    /// "equal jitter", half the exponential delay plus up to as much again, so
    /// devices that failed together spread out but never retry at once.
    /// - Parameter jitter: a random number in 0..<1.
    public func delay(forAttempt attempt: Int, jitter: Double) -> Duration {
        let initial = initialDelay.seconds
        let cap = maximumDelay.seconds
        let exponent = Double(max(0, attempt - 1))
        let base = min(cap, initial * pow(multiplier, exponent))
        let unit = min(max(jitter, 0), 1)
        return .seconds(base / 2 + base / 2 * unit)
    }

    private func pow(_ base: Double, _ exponent: Double) -> Double {
        var result = 1.0
        var remaining = Int(exponent)
        while remaining > 0 && result < 1e12 {
            result *= base
            remaining -= 1
        }
        return result
    }
}

extension Duration {
    /// The duration in seconds, as a double.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
