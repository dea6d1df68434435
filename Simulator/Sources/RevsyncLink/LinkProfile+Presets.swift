extension LinkProfile {
    /// A wired connection: 2 ms ± 1 ms each way, no cap, no faults.
    public static let good = LinkProfile(
        upstreamLatency: .init(base: .milliseconds(2), jitter: .milliseconds(1)),
        downstreamLatency: .init(base: .milliseconds(2), jitter: .milliseconds(1))
    )

    /// Home Wi-Fi: 15 ms + up to 25 ms each way, 2 MB/s, and per request
    /// 0.5 % refused, 0.5 % reset mid-request, 0.5 % reset mid-response,
    /// 0.2 % stalled (10 s), 0.3 % dropped after commit, 0.2 % duplicated.
    /// No scheduled offline windows.
    public static let wifi = LinkProfile(
        upstreamLatency: .init(base: .milliseconds(15), jitter: .milliseconds(25)),
        downstreamLatency: .init(base: .milliseconds(15), jitter: .milliseconds(25)),
        bandwidth: 2_000_000,
        faults: .init(
            refuse: 0.005,
            resetMidRequest: 0.005,
            resetMidResponse: 0.005,
            stall: 0.002,
            dropAfterCommit: 0.003,
            duplicate: 0.002
        ),
        stallDuration: .seconds(10)
    )

    /// A train in a tunnel: 150 ms + up to 350 ms each way, 50 kB/s, and per
    /// request 5 % refused, 5 % reset mid-request, 5 % reset mid-response,
    /// 3 % stalled (15 s), 5 % dropped after commit, 3 % duplicated, 2 % split
    /// (with another server instance to go to); offline windows of 5 s to 2 min
    /// after 20 s to 3 min online.
    public static let terrible = LinkProfile(
        upstreamLatency: .init(base: .milliseconds(150), jitter: .milliseconds(350)),
        downstreamLatency: .init(base: .milliseconds(150), jitter: .milliseconds(350)),
        bandwidth: 50_000,
        faults: .init(
            refuse: 0.05,
            resetMidRequest: 0.05,
            resetMidResponse: 0.05,
            stall: 0.03,
            dropAfterCommit: 0.05,
            duplicate: 0.03,
            split: 0.02
        ),
        stallDuration: .seconds(15),
        offlineSchedule: .init(online: .seconds(20) ... .seconds(180), offline: .seconds(5) ... .seconds(120))
    )

    /// The preset called `name` (`good`, `wifi`, `terrible`), for `--link`.
    public static func preset(named name: String) -> LinkProfile? {
        switch name {
        case "good": .good
        case "wifi": .wifi
        case "terrible": .terrible
        default: nil
        }
    }
}
