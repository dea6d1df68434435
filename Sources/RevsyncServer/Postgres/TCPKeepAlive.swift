/// How a connection to PostgreSQL learns that its path died without a word: a NAT or a
/// firewall that forgot the connection, a failover that moved the address, a cable pulled.
/// Nothing is closed then, nothing answers, and a query waits until the kernel gives up
/// retransmitting, about 15 minutes on Linux; a pooled connection's keep-alive `SELECT 1`
/// waits as long, so the pool fills with connections that never come back and every request
/// gets `503` long after PostgreSQL is reachable again.
///
/// TCP's keep-alive probes find a silent peer while a connection waits for an answer, and a
/// user timeout drops one whose sent bytes stay unacknowledged; PostgreSQL's answer may take
/// as long as it likes, since a live peer acknowledges both. Named and read as libpq reads
/// them from a connection URL (`keepalives`, `keepalives_idle`, `keepalives_interval`,
/// `keepalives_count`, `tcp_user_timeout`), with 0 leaving a value to the system as libpq
/// does; the defaults are ours, tighter than the system's, so that a dead path is dropped
/// within about 15 s of silence (10.9–13.6 s in the soak).
package struct TCPKeepAlive: Sendable, Equatable {
    /// Seconds a connection is silent before the first probe.
    package var idle = 5
    /// Seconds between probes.
    package var interval = 2
    /// Probes left unanswered before the connection is dropped (the user timeout, when set,
    /// decides instead on Linux).
    package var count = 3
    /// Milliseconds sent bytes, probes included, may stay unacknowledged before the
    /// connection is dropped.
    package var userTimeoutMilliseconds = 10_000

    package init() {}

    /// The settings a URL's query items ask for; nil for `keepalives=0` (the system's TCP
    /// settings, no probes). `value` reads one item.
    package static func from(_ value: (String) -> String?) throws -> TCPKeepAlive? {
        switch value("keepalives") {
        case nil, "1": break
        case "0": return nil
        case let other?: throw SettingsError("keepalives in REVSYNC_DATABASE_URL must be 0 or 1, not \"\(other)\"")
        }
        var keepAlive = TCPKeepAlive()
        // Linux's own limits (MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL, MAX_TCP_KEEPCNT): past them
        // setsockopt fails, which would surface only once a connection is open.
        func read(_ name: String, unit: String, upTo limit: Int, into field: inout Int) throws {
            guard let text = value(name) else { return }
            guard let number = Int(text), (0...limit).contains(number) else {
                throw SettingsError("\(name) in REVSYNC_DATABASE_URL must be a whole number of \(unit) from 0 (the system's) to \(limit), not \"\(text)\"")
            }
            field = number
        }
        try read("keepalives_idle", unit: "seconds", upTo: 32_767, into: &keepAlive.idle)
        try read("keepalives_interval", unit: "seconds", upTo: 32_767, into: &keepAlive.interval)
        try read("keepalives_count", unit: "probes", upTo: 127, into: &keepAlive.count)
        try read("tcp_user_timeout", unit: "milliseconds", upTo: Int(Int32.max), into: &keepAlive.userTimeoutMilliseconds)
        return keepAlive
    }
}
