import Logging
import NIOCore
import PostgresNIO
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Gives each PostgreSQL connection its `TCPKeepAlive` and its `HeardStamp` the first time it
/// is leased.
///
/// PostgresNIO 1.33.2 sets no socket options of its own and offers no way to: its pool makes
/// the connections, and a connection's channel is internal. It is read here by reflection, the
/// one way in; `SilentDatabasePathTests` fails if a later PostgresNIO renames it, and the
/// server says so in its log (the connections then keep the system's settings).
///
/// A connection the pool opened and never lent (it came too late for the request that asked
/// for it) keeps the system's settings until its first lease: the pool closes it idle within
/// a minute.
final class ConnectionSetup: Sendable {
    let keepAlive: TCPKeepAlive?
    private let logger: Logger
    /// Connections already set, until they close, with their stamp (nil where the channel is hidden).
    private let prepared = Mutex<[PostgresConnection.ID: HeardStamp?]>([:])
    private let unreachableLogged = Atomic<Bool>(false)

    init(keepAlive: TCPKeepAlive?, logger: Logger) {
        self.keepAlive = keepAlive
        self.logger = logger
    }

    /// Sets the options and the stamp on `connection` unless done already, and returns its
    /// stamp. Failing to is logged, not thrown: the connection works as it did before.
    func prepare(_ connection: PostgresConnection) async -> HeardStamp? {
        let id = connection.id
        if let known = prepared.withLock({ $0[id] }) { return known }
        let channel = Self.channel(of: connection)
        let stamp = channel.map { _ in HeardStamp() }
        prepared.withLock { $0[id] = .some(stamp) }
        connection.closeFuture.whenComplete { _ in self.prepared.withLock { _ = $0.removeValue(forKey: id) } }
        guard let channel, let stamp else {
            if !unreachableLogged.exchange(true, ordering: .relaxed) {
                logger.error(
                    "PostgreSQL connections keep the system's TCP settings: this PostgresNIO hides the connection's channel, so a path that dies silently holds a connection for as long as the kernel retransmits (about 15 minutes), and a request's work is cut three times the timeout after its start however PostgreSQL answers")
            }
            return nil
        }
        do {
            try await channel.pipeline.addHandler(stamp, position: .first).get()
        } catch {
            logger.warning("could not watch a PostgreSQL connection's reads: \(error)")
        }
        guard let keepAlive else { return stamp }
        do {
            try await Self.apply(keepAlive, to: channel)
        } catch {
            logger.warning("could not set TCP keep-alive on a PostgreSQL connection (it keeps the system's settings): \(error)")
        }
        return stamp
    }

    /// The connection's channel, read by reflection (see the type's comment).
    static func channel(of connection: PostgresConnection) -> (any Channel)? {
        Mirror(reflecting: connection).descendant("channel") as? any Channel
    }

    static func apply(_ keepAlive: TCPKeepAlive, to channel: any Channel) async throws {
        try await channel.setOption(.socketOption(.so_keepalive), value: 1).get()
        #if os(Linux)
        let options: [(CInt, Int)] = [
            (TCP_KEEPIDLE, keepAlive.idle), (TCP_KEEPINTVL, keepAlive.interval), (TCP_KEEPCNT, keepAlive.count),
            (TCP_USER_TIMEOUT, keepAlive.userTimeoutMilliseconds),
        ]
        for (name, value) in options where value > 0 {
            try await channel.setOption(.tcpOption(.init(rawValue: name)), value: SocketOptionValue(value)).get()
        }
        #endif
    }
}
