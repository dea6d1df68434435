import AsyncHTTPClient
import NIOCore
import RevsyncLink

/// A device stand-in: AsyncHTTPClient, always shut down. Its timeouts only stop a request
/// that hangs: every suite runs at once on two cores, and in the suite's first seconds a
/// request through a link with 150 ms of latency each way took longer than the 2 s read
/// timeout these once had, which failed tests about something else. A test about a
/// timeout passes its own deadline.
@discardableResult
func withClient<T: Sendable>(_ body: @Sendable (HTTPClient) async throws -> T) async throws -> T {
    var configuration = HTTPClient.Configuration()
    configuration.timeout = .init(connect: .seconds(10), read: .seconds(20))
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    do {
        let result = try await body(client)
        try await client.shutdown()
        return result
    } catch {
        try? await client.shutdown()
        throw error
    }
}

/// POSTs `text` to `/echo` through the link and returns the answer's body, or
/// throws whatever the client saw.
func echo(_ client: HTTPClient, port: Int, _ text: String, timeout: TimeAmount = .seconds(20)) async throws -> String {
    var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/echo")
    request.method = .POST
    request.body = .bytes(ByteBuffer(string: text))
    let response = try await client.execute(request, timeout: timeout)
    let body = try await response.body.collect(upTo: 1 << 20)
    guard response.status == .ok else { throw UnexpectedStatus(code: response.status.code) }
    return String(buffer: body)
}

/// POSTs `text` to `/hold`, which the server holds `milliseconds` before answering (a
/// long-poll), with a client whose read timeout is above that.
func held(_ port: Int, _ text: String, milliseconds: Int, timeout: TimeAmount = .seconds(30)) async throws -> String {
    var configuration = HTTPClient.Configuration()
    configuration.timeout = .init(connect: .seconds(10), read: timeout)
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    do {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/hold?ms=\(milliseconds)")
        request.method = .POST
        request.body = .bytes(ByteBuffer(string: text))
        let response = try await client.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: 1 << 20)
        try await client.shutdown()
        guard response.status == .ok else { throw UnexpectedStatus(code: response.status.code) }
        return String(buffer: body)
    } catch {
        try? await client.shutdown()
        throw error
    }
}

struct UnexpectedStatus: Error {
    var code: UInt
}

/// Starts a link in front of the echo server, runs `body`, then shuts the link down.
@discardableResult
func withLink<T: Sendable>(
    _ profile: LinkProfile,
    seed: UInt64 = 1,
    serverPort: Int,
    splitTargetPort: Int? = nil,
    onFate: (@Sendable (RequestFate) -> Void)? = nil,
    onSplit: (@Sendable (SplitExchange) -> Void)? = nil,
    onOfflineChange: (@Sendable (Bool) -> Void)? = nil,
    _ body: @Sendable (FaultyLink) async throws -> T
) async throws -> T {
    let link = try await FaultyLink(
        profile: profile, seed: seed, targetPort: serverPort, splitTargetPort: splitTargetPort, onFate: onFate, onSplit: onSplit,
        onOfflineChange: onOfflineChange)
    do {
        let result = try await body(link)
        try await link.shutdown()
        return result
    } catch {
        try? await link.shutdown()
        throw error
    }
}

