import NIOCore
import Synchronization

extension RedisClient {
    /// Runs a Lua script atomically on the server (`EVALSHA`, loading it when needed).
    ///
    /// The first call with a script sends it with `SCRIPT LOAD` and `EVAL` in one round
    /// trip and remembers the SHA1 Redis reports; later calls send only `EVALSHA`. If
    /// Redis has forgotten the script (restart, `SCRIPT FLUSH`) it answers `NOSCRIPT`,
    /// which cannot have run anything, and the script is sent again in the same call.
    ///
    /// - Returns: the script's result; error replies (including errors raised by the script) are thrown.
    /// - Throws: ``RedisError/server(message:)`` for an error reply, or another ``RedisError``.
    public func eval(script: String, keys: [String], args: [String] = []) async throws -> RedisValue {
        try await eval(script: script, keys: keys, binaryArgs: args.map { ByteBuffer(string: $0) })
    }

    /// ``eval(script:keys:args:)`` with binary arguments, e.g. a JSON document the script stores.
    /// (A label of its own, so that `args: []` is not ambiguous.)
    public func eval(script: String, keys: [String], binaryArgs args: [ByteBuffer]) async throws -> RedisValue {
        let tail = ([String(keys.count)] + keys).map { ByteBuffer(string: $0) } + args
        return try await withConnection { [scripts] connection throws(RedisError) in
            if let sha = scripts.sha(for: script) {
                let reply = try await connection.execute([ByteBuffer(string: "EVALSHA"), ByteBuffer(string: sha)] + tail)
                if case .error(let message) = reply, message.hasPrefix("NOSCRIPT") {
                    scripts.forget(script)
                } else {
                    return try reply.throwingServerError()
                }
            }
            let replies = try await connection.execute(pipeline: [
                [ByteBuffer(string: "SCRIPT"), ByteBuffer(string: "LOAD"), ByteBuffer(string: script)],
                [ByteBuffer(string: "EVAL"), ByteBuffer(string: script)] + tail,
            ])
            guard replies.count == 2 else { throw .protocolError("expected 2 replies, got \(replies.count)") }
            if case .bulk = replies[0], let sha = replies[0].stringValue {
                scripts.remember(sha, for: script)
            }
            return try replies[1].throwingServerError()
        }
    }
}

/// The SHA1 Redis reported for each script source this client has run.
///
/// Keyed by the full source: scripts are a handful of constants in the code, so
/// the table stays small.
final class ScriptCache: Sendable {
    private let shas = Mutex<[String: String]>([:])

    func sha(for script: String) -> String? { shas.withLock { $0[script] } }
    func remember(_ sha: String, for script: String) { shas.withLock { $0[script] = sha } }
    func forget(_ script: String) { _ = shas.withLock { $0.removeValue(forKey: script) } }
}
