import CHiredis
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One blocking hiredis connection (`redisContext*`).
///
/// Every method blocks the calling thread, so they are only called from a
/// thread-pool work item (see `RedisClient.withConnection`). Once the context
/// reports an error it is dead: `isBroken` turns true and the pool frees it
/// instead of taking it back.
final class RedisConnection {
    private let context: UnsafeMutablePointer<redisContext>
    private let endpoint: String
    private let commandTimeout: Duration

    /// Connects, sets the I/O timeout and selects the database. Blocks.
    init(configuration: RedisConfiguration) throws(RedisError) {
        let endpoint = configuration.endpoint
        guard
            let context = redisConnectWithTimeout(
                configuration.host, Int32(configuration.port), timeval(configuration.connectTimeout))
        else {
            throw .connectionFailed(endpoint: endpoint, reason: "hiredis could not allocate a context")
        }
        guard context.pointee.err == 0 else {
            let reason = Self.errorText(context)
            redisFree(context)
            let detail = reason == "Connection timed out" ? "\(reason) after \(configuration.connectTimeout)" : reason
            throw .connectionFailed(endpoint: endpoint, reason: detail)
        }
        guard redisSetTimeout(context, timeval(configuration.commandTimeout)) == REDIS_OK else {
            let reason = Self.errorText(context)
            redisFree(context)
            throw .connectionFailed(endpoint: endpoint, reason: "cannot set the socket timeout: \(reason)")
        }
        #if canImport(Darwin)
        // Darwin has no per-thread answer to SIGPIPE; the socket option keeps a write to a
        // closed connection an EPIPE error instead of a process kill.
        var on: Int32 = 1
        setsockopt(context.pointee.fd, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size))
        #endif
        self.context = context
        self.endpoint = endpoint
        self.commandTimeout = configuration.commandTimeout

        if configuration.database != 0 {
            // From here on a throw runs deinit, which frees the context.
            let reply: RedisValue
            do {
                reply = try execute([ByteBuffer(string: "SELECT"), ByteBuffer(string: String(configuration.database))])
            } catch {
                throw .connectionFailed(endpoint: endpoint, reason: "SELECT \(configuration.database) failed: \(error)")
            }
            if case .error(let message) = reply {
                throw .connectionFailed(endpoint: endpoint, reason: "SELECT \(configuration.database) failed: \(message)")
            }
        }
    }

    deinit {
        redisFree(context)
    }

    /// Whether hiredis has flagged the context; a flagged context never recovers.
    var isBroken: Bool { context.pointee.err != 0 }

    /// Whether an idle connection can still be used: nothing flagged, and the socket
    /// has neither been closed by the server (Redis restarted, idle timeout) nor holds
    /// bytes nobody asked for. Catches a dead connection before a command is sent on
    /// it, so a restart of Redis costs the callers nothing once it is back.
    func isReusable() -> Bool {
        guard !isBroken else { return false }
        var byte: UInt8 = 0
        let received = recv(context.pointee.fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if received < 0 {
            return errno == EAGAIN || errno == EWOULDBLOCK
        }
        return false
    }

    /// Sends one command and reads its reply. An error reply is returned, not thrown.
    func execute(_ arguments: [ByteBuffer]) throws(RedisError) -> RedisValue {
        var request = ByteBufferAllocator().buffer(capacity: arguments.reduce(16) { $0 + $1.readableBytes + 16 })
        try RESPCommandEncoder.encode(arguments, into: &request)
        try append(request)
        return try readReply()
    }

    /// Sends all commands in one write, then reads one reply per command.
    /// Error replies are returned in place, not thrown.
    func execute(pipeline commands: [[ByteBuffer]]) throws(RedisError) -> [RedisValue] {
        guard !commands.isEmpty else { return [] }
        try append(RESPCommandEncoder.encode(commands))
        var replies: [RedisValue] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            replies.append(try readReply())
        }
        return replies
    }

    /// The next message pushed on a subscribed connection, or nil when none arrives within
    /// `timeout`. The socket's own timeout cannot serve here: hiredis marks the context dead
    /// after a timed-out read, so the wait happens in `poll` and only ready bytes are read.
    func nextPushed(within timeout: Duration) throws(RedisError) -> RedisValue? {
        if let buffered = try replyFromReader() { return buffered }
        var descriptor = pollfd(fd: context.pointee.fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let ready = poll(&descriptor, 1, milliseconds)
        if ready < 0 {
            guard errno == EINTR else { throw .connectionLost(endpoint: endpoint, reason: "poll failed with errno \(errno)") }
            return nil
        }
        guard ready > 0 else { return nil }
        guard redisBufferRead(context) == REDIS_OK else { throw failure(errno: errno) }
        return try replyFromReader()
    }

    /// A reply hiredis has read whole already, without touching the socket.
    private func replyFromReader() throws(RedisError) -> RedisValue? {
        var reply: UnsafeMutableRawPointer?
        guard redisGetReplyFromReader(context, &reply) == REDIS_OK else { throw failure(errno: errno) }
        guard let reply else { return nil }
        defer { freeReplyObject(reply) }
        return try RedisValue(copying: reply.assumingMemoryBound(to: redisReply.self))
    }

    private func append(_ request: ByteBuffer) throws(RedisError) {
        guard !isBroken else { throw failure(errno: 0) }
        let status = request.withUnsafeReadableBytes { bytes in
            redisAppendFormattedCommand(context, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
        }
        guard status == REDIS_OK else { throw failure(errno: errno) }
    }

    private func readReply() throws(RedisError) -> RedisValue {
        var reply: UnsafeMutableRawPointer?
        let status = redisGetReply(context, &reply)
        // Read at once: hiredis leaves the cause of an I/O error in errno.
        let savedErrno = errno
        guard status == REDIS_OK, let reply else { throw failure(errno: savedErrno) }
        defer { freeReplyObject(reply) }
        return try RedisValue(copying: reply.assumingMemoryBound(to: redisReply.self))
    }

    /// Turns the context's error into a `RedisError`. A socket timeout shows up as an
    /// I/O error whose errno is EAGAIN, which is the only way to tell it from a broken socket.
    private func failure(errno savedErrno: Int32) -> RedisError {
        let reason = Self.errorText(context)
        switch context.pointee.err {
        case REDIS_ERR_IO where savedErrno == EAGAIN || savedErrno == EWOULDBLOCK:
            return .timeout(endpoint: endpoint, after: commandTimeout)
        case REDIS_ERR_PROTOCOL:
            return .protocolError(reason)
        case 0:
            return .protocolError("hiredis reported a failure without an error")
        default:
            return .connectionLost(endpoint: endpoint, reason: reason)
        }
    }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}

// @unchecked Sendable: the context is never touched by two threads at once. A connection
// is reachable only from the pool's idle list (behind its mutex) or from the single
// thread-pool work item that took it out and puts it back when done; the mutex and the
// thread pool's hand-off order those accesses. The conformance only lets the connection
// sit in the pool's `Mutex` state and be used inside that `@Sendable` work item.
extension RedisConnection: @unchecked Sendable {}

extension timeval {
    fileprivate init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self.init(tv_sec: time_t(seconds), tv_usec: suseconds_t(attoseconds / 1_000_000_000_000))
    }
}
