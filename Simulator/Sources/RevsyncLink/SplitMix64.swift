/// A small seeded pseudo-random generator (SplitMix64).
///
/// The link needs its own generator because the standard library's is not
/// seedable, and a soak run must replay its faults from `--seed`.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator whose sequence is fully determined by `seed`.
    public init(seed: UInt64) {
        self.state = seed
    }

    /// Returns the next 64 random bits.
    public mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in `0..<1` from the top 53 bits, so each call consumes
    /// exactly one step of the sequence (keeps replays aligned).
    public mutating func nextUnit() -> Double {
        Double(self.next() >> 11) * 0x1.0p-53
    }
}
