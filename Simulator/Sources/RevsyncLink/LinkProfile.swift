/// The behaviour of a simulated network link: delays, a bandwidth cap and the
/// odds of each fault, drawn per request.
public struct LinkProfile: Sendable, Equatable {
    /// One-way delay: `base` plus a uniform draw in `0...jitter`.
    public struct Latency: Sendable, Equatable {
        /// The delay every message pays.
        public var base: Duration
        /// The upper bound of the random extra delay.
        public var jitter: Duration

        /// Creates a one-way delay.
        public init(base: Duration = .zero, jitter: Duration = .zero) {
            self.base = base
            self.jitter = jitter
        }

        /// No delay.
        public static let none = Latency()
    }

    /// Per-request fault probabilities, each in `0...1`. Their sum must not
    /// exceed 1: a single draw picks at most one fault.
    public struct FaultOdds: Sendable, Equatable {
        /// See ``RequestFate/refuse``.
        public var refuse: Double
        /// See ``RequestFate/resetMidRequest``.
        public var resetMidRequest: Double
        /// See ``RequestFate/resetMidResponse``.
        public var resetMidResponse: Double
        /// See ``RequestFate/stall``.
        public var stall: Double
        /// See ``RequestFate/dropAfterCommit``.
        public var dropAfterCommit: Double
        /// See ``RequestFate/duplicate``.
        public var duplicate: Double
        /// See ``RequestFate/split``.
        public var split: Double

        /// Creates fault odds; every probability defaults to zero.
        public init(
            refuse: Double = 0,
            resetMidRequest: Double = 0,
            resetMidResponse: Double = 0,
            stall: Double = 0,
            dropAfterCommit: Double = 0,
            duplicate: Double = 0,
            split: Double = 0
        ) {
            self.refuse = refuse
            self.resetMidRequest = resetMidRequest
            self.resetMidResponse = resetMidResponse
            self.stall = stall
            self.dropAfterCommit = dropAfterCommit
            self.duplicate = duplicate
            self.split = split
        }

        /// No faults at all.
        public static let none = FaultOdds()

        /// The faults in the fixed order the single draw walks through; the
        /// order is part of the replay contract, so do not reorder.
        var ordered: [(RequestFate, Double)] {
            [
                (.refuse, self.refuse),
                (.resetMidRequest, self.resetMidRequest),
                (.resetMidResponse, self.resetMidResponse),
                (.stall, self.stall),
                (.dropAfterCommit, self.dropAfterCommit),
                (.duplicate, self.duplicate),
                (.split, self.split),
            ]
        }

        /// The fate a uniform draw `u` in `0..<1` selects.
        func fate(for u: Double) -> RequestFate {
            var edge = 0.0
            for (fate, odds) in self.ordered {
                edge += max(0, odds)
                if u < edge { return fate }
            }
            return .pass
        }
    }

    /// Delay from device to server.
    public var upstreamLatency: Latency
    /// Delay from server to device.
    public var downstreamLatency: Latency
    /// Bytes per second in each direction, or `nil` for no cap. Applied as
    /// extra delay per message (body size / rate), not as TCP back-pressure,
    /// since the link holds whole messages anyway.
    public var bandwidth: Int?
    /// The odds of each fault per request.
    public var faults: FaultOdds
    /// How long a stalled request holds the device's connection before closing it. The
    /// presets' (10 s, 15 s) are shorter than the simulator's devices' timeouts (60 s by
    /// default), so those devices see a long silence and then a closed connection.
    public var stallDuration: Duration
    /// Seeded offline windows, or `nil` for a link that is only taken offline by hand.
    public var offlineSchedule: OfflineSchedule?

    /// Creates a profile; every knob defaults to a perfect link.
    public init(
        upstreamLatency: Latency = .none,
        downstreamLatency: Latency = .none,
        bandwidth: Int? = nil,
        faults: FaultOdds = .none,
        stallDuration: Duration = .seconds(30),
        offlineSchedule: OfflineSchedule? = nil
    ) {
        self.upstreamLatency = upstreamLatency
        self.downstreamLatency = downstreamLatency
        self.bandwidth = bandwidth
        self.faults = faults
        self.stallDuration = stallDuration
        self.offlineSchedule = offlineSchedule
    }
}
