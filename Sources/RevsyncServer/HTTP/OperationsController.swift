import Hummingbird
import NIOCore

/// `GET /health` (the process answers), `GET /ready` (PostgreSQL answers) and `GET /metrics`.
struct OperationsController<Context: RequestContext>: Sendable {
    let database: Database
    let metrics: ServerMetrics

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
        router.get("/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: metrics.exposition())))
        }
    }
}
