import AsyncHTTPClient
import NIOCore

/// Reads the servers' `/metrics` and keeps the catch-up histogram across instance restarts.
///
/// Scrapes fail while an instance is down or stalled; they are counted and otherwise
/// ignored. ``ServerFleet`` scrapes an instance right before it kills or stops it and
/// then calls ``retire(_:)``, so a killed process's counts survive it.
public actor ServerMetricsScraper {
    public nonisolated let baseURLs: [String]
    private let httpClient: HTTPClient
    private let timeout: TimeAmount
    private var incarnations = MetricsIncarnations()
    /// Bumped by ``retire(_:)``: a scrape that started before it belongs to the old incarnation.
    private var generations: [Int]
    public private(set) var successfulScrapes = 0
    public private(set) var failedScrapes = 0

    /// The most `/metrics` may weigh; the server's is a few kilobytes.
    private static let maxBodyBytes = 4 * 1024 * 1024

    /// - Parameters:
    ///   - baseURLs: `http://host:port` of each instance, indexed like the fleet's.
    ///   - httpClient: a running client the caller keeps (and shuts down, unless it is `.shared`).
    ///   - timeout: for one whole scrape.
    public init(baseURLs: [String], httpClient: HTTPClient = .shared, timeout: Duration = .seconds(2)) {
        self.baseURLs = baseURLs
        self.httpClient = httpClient
        self.timeout = .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
        self.generations = Array(repeating: 0, count: baseURLs.count)
    }

    /// Scrapes one instance; false if it could not be read.
    @discardableResult
    public func scrape(_ index: Int) async -> Bool {
        guard baseURLs.indices.contains(index) else { return false }
        let generation = generations[index]
        guard let text = await fetch(baseURLs[index] + "/metrics") else {
            failedScrapes += 1
            return false
        }
        // The instance was retired while this scrape was in flight: its counts are already kept.
        guard generations[index] == generation else { return false }
        successfulScrapes += 1
        incarnations.record(instance: index, ServerMetricsSnapshot(exposition: text))
        return true
    }

    /// Scrapes every instance concurrently.
    public func scrapeAll() async {
        await withTaskGroup(of: Void.self) { group in
            for index in baseURLs.indices {
                group.addTask { await self.scrape(index) }
            }
        }
    }

    /// The instance's process is going away: keep its last scraped counts and count its
    /// next process from zero.
    public func retire(_ index: Int) {
        guard generations.indices.contains(index) else { return }
        generations[index] += 1
        incarnations.retire(instance: index)
    }

    /// Catch-up latency over every instance and incarnation scraped so far; nil before any
    /// catch-up was counted. See ``BucketHistogram/percentiles()`` for how it is estimated.
    public func catchUpLatency() -> LatencyPercentiles? {
        incarnations.catchUp.percentiles()
    }

    /// The summed catch-up buckets, for a report that wants more than the percentiles.
    public func catchUpHistogram() -> BucketHistogram {
        incarnations.catchUp
    }

    /// The highest `revsync_head_revision` seen in any scrape.
    public func headRevision() -> Int64? {
        incarnations.headRevision
    }

    /// The value of the unlabelled sample `name` in one instance's `/metrics` now (not kept with
    /// the scrapes); nil if the instance could not be read or has no such sample.
    public func currentValue(of name: String, instance index: Int) async -> Double? {
        guard baseURLs.indices.contains(index), let text = await fetch(baseURLs[index] + "/metrics") else { return nil }
        return PrometheusText.parse(text).first { $0.name == name && $0.labels.isEmpty }?.value
    }

    private func fetch(_ url: String) async -> String? {
        do {
            let response = try await httpClient.execute(HTTPClientRequest(url: url), timeout: timeout)
            let body = try await response.body.collect(upTo: Self.maxBodyBytes)
            guard response.status == .ok else { return nil }
            return String(buffer: body)
        } catch {
            return nil
        }
    }
}
