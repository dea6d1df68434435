import Hummingbird
import Logging
import NIOCore
import RevsyncHarness
import Synchronization

/// Counts what the server really handled: a request counts only once its
/// whole body arrived, which is what "the server committed" means here.
final class EchoRecorder: Sendable {
    private let bodies = Mutex<[String]>([])

    func record(_ body: String) {
        self.bodies.withLock { $0.append(body) }
    }

    var count: Int { self.bodies.withLock { $0.count } }
    var all: [String] { self.bodies.withLock { $0 } }
}

/// Runs a Hummingbird server on 127.0.0.1 with an ephemeral port and a
/// `POST /echo` that records and returns the body, for the duration of `body`;
/// `POST /hold?ms=N` does the same after holding the request N ms, as a server
/// holds a long-poll (sending nothing meanwhile). `/echo` answers with `prefix` before
/// the body, after `delay`, so that two servers' answers can be told apart.
@discardableResult
func withEchoServer<T: Sendable>(
    prefix: String = "", delay: Duration = .zero,
    _ body: @Sendable (_ port: Int, _ recorder: EchoRecorder) async throws -> T
) async throws -> T {
    let recorder = EchoRecorder()
    let router = Router()
    router.post("/echo") { request, _ -> Response in
        let bytes = try await request.body.collect(upTo: 1 << 20)
        recorder.record(String(buffer: bytes))
        if delay > .zero { try await Task.sleep(for: delay) }
        return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: prefix + String(buffer: bytes))))
    }
    router.post("/hold") { request, _ -> Response in
        let bytes = try await request.body.collect(upTo: 1 << 20)
        let milliseconds = request.uri.queryParameters.get("ms", as: Int.self) ?? 0
        try await Task.sleep(for: .milliseconds(milliseconds))
        recorder.record(String(buffer: bytes))
        return Response(status: .ok, body: .init(byteBuffer: bytes))
    }
    let (ports, portsContinuation) = AsyncStream.makeStream(of: Int.self)
    var logger = Logger(label: "echo-server")
    // Stopping by task cancellation (no ServiceGroup here) makes Hummingbird
    // log its shutdown at error level; that is expected noise, not a failure.
    logger.logLevel = .critical
    let app = Application(
        router: router,
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in
            portsContinuation.yield(channel.localAddress?.port ?? 0)
            portsContinuation.finish()
        },
        logger: logger
    )
    return try await withRunning(app) {
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port != 0 else { throw EchoServerError.noPort }
        return try await body(port, recorder)
    }
}

enum EchoServerError: Error {
    case noPort
}
