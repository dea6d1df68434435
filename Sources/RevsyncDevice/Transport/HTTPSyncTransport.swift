import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import RevsyncGzip
import RevsyncWire

/// The transport over HTTP: JSON bodies, gzip both ways, a pooled client with
/// timeouts. Make one per server and call `shutdown()` when done with it.
public final class HTTPSyncTransport: SyncTransport {
    public struct Configuration: Sendable {
        /// The server's base URL, e.g. `http://127.0.0.1:8080` (no trailing path).
        public var baseURL: String
        /// Time to establish a connection.
        public var connectTimeout: Duration = .seconds(10)
        /// Longest wait for the next bytes of an answer.
        public var readTimeout: Duration = .seconds(60)
        /// Deadline of a whole `/sync`, `/schema` or `/devices` exchange. A long-poll
        /// (`/sync` with `wait`) gets its wait on top.
        public var requestTimeout: Duration = .seconds(60)
        /// How far below `readTimeout` a long-poll's wait is kept: the server sends nothing
        /// while it holds a request, so a `/sync` asking for more than `readTimeout` minus
        /// this is sent asking for that much, and the read timeout never cuts a request the
        /// server is legitimately holding.
        public var longPollMargin: Duration = .seconds(5)
        /// Deadline of `GET /snapshot` (large).
        public var snapshotTimeout: Duration = .seconds(600)
        /// How long an idle pooled connection is kept for reuse.
        public var idleConnectionTimeout: Duration = .seconds(60)
        /// Request bodies at least this large are sent gzip-compressed; nil: never.
        public var compressRequestsFrom: Int? = 1024
        /// Ask for gzip responses.
        public var acceptGzip = true
        /// Largest response body accepted, compressed or inflated.
        public var maxResponseBytes = 1 << 30
        public var logger = Logger(label: "revsync.device.http")
        /// Told of every finished exchange, successful or not (sizes and duration;
        /// the simulator's figures). Called on the exchange's task: keep it quick.
        public var observer: (@Sendable (HTTPExchange) -> Void)?

        public init(baseURL: String) {
            self.baseURL = baseURL
        }
    }

    public let configuration: Configuration
    let client: HTTPClient
    let base: String

    public init(configuration: Configuration) {
        self.configuration = configuration
        var base = configuration.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.base = base
        var clientConfiguration = HTTPClient.Configuration(
            timeout: .init(connect: .init(configuration.connectTimeout), read: .init(configuration.readTimeout)),
            connectionPool: .init(idleTimeout: .init(configuration.idleConnectionTimeout)),
            // Bodies are inflated here, with our own limit (see PITFALLS.md).
            decompression: .disabled)
        clientConfiguration.httpVersion = .automatic
        self.client = HTTPClient(
            eventLoopGroupProvider: .singleton, configuration: clientConfiguration,
            backgroundActivityLogger: configuration.logger)
    }

    /// Closes the pooled connections. The transport cannot be used afterwards.
    public func shutdown() async throws {
        try await client.shutdown()
    }

    public func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse {
        var request = request
        var timeout = configuration.requestTimeout
        if let wait = request.wait, wait > 0 {
            let wait = min(wait, max(0, (configuration.readTimeout - configuration.longPollMargin).seconds))
            request.wait = wait
            timeout += .seconds(wait)
        }
        let body = try encode(request)
        do {
            return try await exchange(
                .POST, "/sync", token: token, body: body, compress: true, timeout: timeout,
                changeSets: request.changeSets.count, wait: request.wait)
        } catch SyncTransportError.unsupportedEncoding {
            // The server could not inflate our gzip: say it once more in plain JSON.
            return try await exchange(
                .POST, "/sync", token: token, body: body, compress: false, timeout: timeout,
                changeSets: request.changeSets.count, wait: request.wait)
        }
    }

    public func snapshot(token: String) async throws -> SyncResponse {
        try await exchange(.GET, "/snapshot", token: token, body: nil, compress: false, timeout: configuration.snapshotTimeout)
    }

    public func schema(token: String) async throws -> SchemaDocument {
        try await exchange(.GET, "/schema", token: token, body: nil, compress: false, timeout: configuration.requestTimeout)
    }

    public func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice {
        try await exchange(
            .POST, "/devices", token: adminToken, body: try encode(registration), compress: false, timeout: configuration.requestTimeout)
    }

    public func device(token: String) async throws -> DeviceInfo {
        try await exchange(.GET, "/devices/me", token: token, body: nil, compress: false, timeout: configuration.requestTimeout)
    }

    // MARK: Exchange

    enum Method: String {
        case GET, POST
    }

    private func encode<Body: Encodable>(_ value: Body) throws -> ByteBuffer {
        do {
            return ByteBuffer(bytes: try JSONEncoder().encode(value))
        } catch {
            throw SyncTransportError.invalidResponse("could not encode the request: \(error)")
        }
    }

    private func exchange<Answer: Decodable>(
        _ method: Method, _ path: String, token: String, body: ByteBuffer?, compress: Bool, timeout: Duration,
        changeSets: Int = 0, wait: Double? = nil
    ) async throws -> Answer {
        guard let observer = configuration.observer else {
            var sizes = HTTPExchange(path: path, changeSets: changeSets)
            return try await exchange(method, path, token: token, body: body, compress: compress, timeout: timeout, sizes: &sizes)
        }
        let started = ContinuousClock.now
        var sizes = HTTPExchange(path: path, changeSets: changeSets)
        sizes.wait = wait
        defer {
            sizes.duration = ContinuousClock.now - started
            observer(sizes)
        }
        return try await exchange(method, path, token: token, body: body, compress: compress, timeout: timeout, sizes: &sizes)
    }

    private func exchange<Answer: Decodable>(
        _ method: Method, _ path: String, token: String, body: ByteBuffer?, compress: Bool, timeout: Duration,
        sizes: inout HTTPExchange
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: base + path)
        switch method {
        case .GET: request.method = .GET
        case .POST: request.method = .POST
        }
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Accept", value: "application/json")
        if configuration.acceptGzip { request.headers.add(name: "Accept-Encoding", value: "gzip") }
        if var body {
            sizes.requestRawBytes = body.readableBytes
            request.headers.add(name: "Content-Type", value: "application/json")
            if compress, let threshold = configuration.compressRequestsFrom, body.readableBytes >= threshold {
                body = Gzip.deflate(body)
                request.headers.add(name: "Content-Encoding", value: "gzip")
            }
            request.headers.add(name: "Content-Length", value: String(body.readableBytes))
            sizes.requestWireBytes = body.readableBytes
            request.body = .bytes(body)
        }

        let status: Int
        var payload: ByteBuffer
        let contentEncoding: [String]
        let retryAfter: String?
        do {
            let response = try await client.execute(request, timeout: .init(timeout))
            status = Int(response.status.code)
            contentEncoding = response.headers["Content-Encoding"]
            retryAfter = response.headers["Retry-After"].first
            payload = try await response.body.collect(upTo: configuration.maxResponseBytes)
            sizes.status = status
            sizes.responseWireBytes = payload.readableBytes
        } catch let error as CancellationError {
            throw error
        } catch let error as NIOTooManyBytesError {
            throw SyncTransportError.invalidResponse("the response is larger than \(configuration.maxResponseBytes) bytes: \(error)")
        } catch {
            throw SyncTransportError.connection("\(method) \(path): \(error)")
        }

        if contentEncoding.contains(where: { $0.lowercased() == "gzip" }) {
            do {
                payload = try Gzip.inflate(payload, maxSize: configuration.maxResponseBytes)
            } catch .tooLarge {
                throw SyncTransportError.invalidResponse("\(method) \(path): the response inflates to more than \(configuration.maxResponseBytes) bytes")
            } catch .corrupt {
                throw SyncTransportError.invalidResponse("\(method) \(path): the gzip body is not complete, valid gzip")
            }
        }
        let bytes = payload.readableBytesView
        sizes.responseRawBytes = bytes.count
        guard (200..<300).contains(status) else {
            throw ErrorResponseMapper.error(status: status, body: Array(bytes), retryAfter: retryAfter)
        }
        // Sync answers and JSON snapshots, the device's bulk, are read straight from the bytes;
        // whatever that reader leaves (and every other answer) goes to JSONDecoder.
        if Answer.self == SyncResponse.self, let answer = payload.withUnsafeReadableBytes({ SyncResponseReader.read($0) }) as? Answer {
            return answer
        }
        do {
            return try JSONDecoder().decode(Answer.self, from: Data(bytes))
        } catch {
            throw SyncTransportError.invalidResponse("\(method) \(path): \(error)")
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
