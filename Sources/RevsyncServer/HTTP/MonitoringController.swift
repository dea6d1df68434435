import Hummingbird
import NIOCore

/// `GET /health` (the process answers), `GET /ready` (PostgreSQL answers) and `GET /metrics`.
struct MonitoringController<Context: RequestContext>: Sendable {
    let database: Database
    let metrics: ServerMetrics
    /// When set, `/metrics` needs it as the bearer token: metrics tell more than a stranger should know.
    let metricsToken: String?

    func addRoutes(to router: Router<Context>) {
        router.get("/health") { request, _ in
            JSONResponse.make(ByteBuffer(string: "{\"status\":\"ok\"}"), for: request)
        }
        router.get("/ready") { request, _ in
            let logger = database.logger
            do {
                try await database.withConnection { connection in try await connection.run("SELECT 1", logger) }
            } catch {
                throw SyncError.unavailable("PostgreSQL is not reachable: \(error)")
            }
            return JSONResponse.make(ByteBuffer(string: "{\"status\":\"ready\"}"), for: request)
        }
        router.get("/metrics") { request, _ in
            if let metricsToken {
                guard let token = Authenticator.bearerToken(request), DeviceStore.constantTimeEqual(token, metricsToken) else {
                    throw SyncError(.unauthorized, "GET /metrics needs \"Authorization: Bearer <REVSYNC_METRICS_TOKEN>\"")
                }
            }
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: metrics.exposition())))
        }
    }
}
