import NIOCore

extension RedisClient {
    /// Sends one command, e.g. `["HSET", key, field, value]`.
    ///
    /// - Returns: the reply; error replies are thrown, never returned.
    /// - Throws: ``RedisError/server(message:)`` with Redis's text for an error reply,
    ///   or another ``RedisError`` if Redis could not be asked.
    public func command(_ arguments: [String]) async throws -> RedisValue {
        try await command(arguments.map { ByteBuffer(string: $0) })
    }

    /// Sends one command whose arguments are raw bytes (binary-safe, e.g. JSON values).
    ///
    /// - Returns: the reply; error replies are thrown, never returned.
    /// - Throws: ``RedisError/server(message:)`` with Redis's text for an error reply,
    ///   or another ``RedisError`` if Redis could not be asked.
    public func command(_ arguments: [ByteBuffer]) async throws -> RedisValue {
        try await withConnection { connection throws(RedisError) in
            try await connection.execute(arguments).throwingServerError()
        }
    }

    /// Sends all commands on one connection in one write, then reads all replies.
    ///
    /// - Returns: one reply per command, in order. A command that Redis rejects yields
    ///   ``RedisValue/error(_:)`` in its place; the others still run.
    /// - Throws: a ``RedisError`` if the connection fails; how many commands ran is then unknown.
    public func pipeline(_ commands: [[ByteBuffer]]) async throws -> [RedisValue] {
        guard !commands.isEmpty else { return [] }
        return try await withConnection { connection throws(RedisError) in
            try await connection.execute(pipeline: commands)
        }
    }

    /// Sends all commands on one connection in one write, like `pipeline(_:)`, and returns
    /// without waiting for their replies: the future completes with them (or fails with a
    /// ``RedisError``) on the connection's event loop. For a caller that has nothing to do with
    /// the replies but react to them.
    public func submit(pipeline commands: [[ByteBuffer]]) async throws -> EventLoopFuture<[RedisValue]> {
        try await withConnection { connection throws(RedisError) in
            try connection.submit(pipeline: commands)
        }
    }

    /// `pipeline(_:)` for commands whose arguments are all text.
    public func pipeline(_ commands: [[String]]) async throws -> [RedisValue] {
        try await pipeline(commands.map { $0.map { ByteBuffer(string: $0) } })
    }

    /// `PING`; throws unless Redis answers `PONG`.
    public func ping() async throws {
        let reply = try await command(["PING"])
        guard reply == .status("PONG") else { throw RedisError.unexpectedReply(expected: "PONG", got: reply) }
    }

    /// `GET`: the value's bytes, or `nil` if the key does not exist.
    public func get(_ key: String) async throws -> ByteBuffer? {
        let reply = try await command(["GET", key])
        switch reply {
        case .bulk(let value): return value
        case .null: return nil
        default: throw RedisError.unexpectedReply(expected: "a bulk string or nil", got: reply)
        }
    }

    /// `MGET`: one entry per key, in order, `nil` where a key does not exist.
    public func mget(_ keys: [String]) async throws -> [ByteBuffer?] {
        // MGET with no keys is a syntax error in Redis; no keys simply means no values.
        guard !keys.isEmpty else { return [] }
        let arguments = (["MGET"] + keys).map { ByteBuffer(string: $0) }
        // Every catch-up reads with MGET: with a ready connection, its reply is awaited here,
        // one small frame deep, instead of through `command`'s calls, whose frames the caller's
        // task would keep for as long as it lives (a connection's task, a waiting device's too).
        let reply = if let connection = pool.readyConnection() {
            try await connection.reply(of: connection.submit(arguments)).throwingServerError()
        } else {
            try await command(arguments)
        }
        guard case .array(let values) = reply, values.count == keys.count else {
            throw RedisError.unexpectedReply(expected: "an array of \(keys.count) values", got: reply)
        }
        return try values.map { value throws(RedisError) -> ByteBuffer? in
            switch value {
            case .bulk(let bytes): return bytes
            case .null: return nil
            default: throw .unexpectedReply(expected: "a bulk string or nil", got: value)
            }
        }
    }

    /// `SET`, with `EX` when `expireSeconds` is given (Redis rejects values below 1).
    public func set(_ key: String, _ value: ByteBuffer, expireSeconds: Int? = nil) async throws {
        var arguments = [ByteBuffer(string: "SET"), ByteBuffer(string: key), value]
        if let expireSeconds {
            arguments += [ByteBuffer(string: "EX"), ByteBuffer(string: String(expireSeconds))]
        }
        let reply = try await command(arguments)
        guard reply == .status("OK") else { throw RedisError.unexpectedReply(expected: "OK", got: reply) }
    }

    /// `DEL`: removes the keys and returns how many existed.
    @discardableResult
    public func del(_ keys: [String]) async throws -> Int {
        guard !keys.isEmpty else { return 0 }
        let reply = try await command(["DEL"] + keys)
        guard case .integer(let count) = reply else { throw RedisError.unexpectedReply(expected: "an integer", got: reply) }
        return Int(count)
    }

    /// `FLUSHALL`: empties every database on the server. For tests against a throwaway server.
    public func flushAll() async throws {
        let reply = try await command(["FLUSHALL"])
        guard reply == .status("OK") else { throw RedisError.unexpectedReply(expected: "OK", got: reply) }
    }
}

extension RedisValue {
    /// The reply itself, or the error reply thrown as ``RedisError/server(message:)``.
    func throwingServerError() throws(RedisError) -> RedisValue {
        if case .error(let message) = self { throw .server(message: message) }
        return self
    }
}
