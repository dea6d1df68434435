import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PostgresNIO
import RevsyncGzip
import RevsyncRules
import RevsyncWire

/// `GET /schema` and `GET /snapshot`: what a new device needs before its first sync.
///
/// `GET /snapshot` answers with the SQLite snapshot file when the request accepts
/// `application/vnd.sqlite3` (see `SnapshotFiles`), and with the JSON snapshot
/// otherwise. Both are sent from files, so a slow client holds no database connection.
struct DatasetController: Sendable {
    typealias Context = RevsyncRequestContext

    static var sqliteType: String { "application/vnd.sqlite3" }

    let authenticator: Authenticator
    let schema: DatasetSchema
    let spool: SnapshotSpool
    let files: SnapshotFiles
    /// JSON snapshots of each device under way (`REVSYNC_MAX_REQUESTS_PER_DEVICE`, counted
    /// apart from its `/sync` requests): each holds a spool file the size of the dataset and
    /// its connection until its client has read it (its place among the requests in flight
    /// ends when the handler returns), so one token must not hold them by the hundred.
    let jsonSnapshotsPerDevice: DeviceRequestCount

    func addRoutes(to router: Router<Context>) {
        router.get("/schema") { request, _ in
            let device = try await authenticator.device(for: request)
            return try JSONResponse.encode(schema.document(for: device.role), for: request)
        }
        router.get("/snapshot") { request, context in
            var context = context
            let device = try await authenticator.device(for: request)
            context.logger[metadataKey: "device.id"] = .string(device.publicId)
            if Self.acceptsSQLite(request.headers[.accept]) {
                return try await sqliteSnapshot(request, device: device, context: context)
            }
            return try await jsonSnapshot(request, device: device, context: context)
        }
        // The router's generated `HEAD` would run the `GET` and drop its body: for the JSON
        // snapshot that is a whole dataset written to a spool file nobody removes. The SQLite
        // file's answer is cheap to describe once the file exists (its body is read only when
        // sent; the first request to an instance waits for its first build, as a `GET` does), so
        // its `HEAD` gives the `GET`'s headers, `Content-Length` and `ETag` among them; the JSON
        // snapshot's gives its type and encoding, and no length. `Range` is ignored, as RFC 9110
        // (14.2) requires for any method but `GET`: the length given is the whole file's.
        router.head("/snapshot") { request, context in
            let device = try await authenticator.device(for: request)
            if Self.acceptsSQLite(request.headers[.accept]) {
                return try await sqliteSnapshot(request, device: device, context: context, ranges: false).createHeadResponse()
            }
            let headers = Self.jsonHeaders(gzip: Gzip.accepted(request.headers[.acceptEncoding]))
            // A body of unknown length that ends at once: no `Content-Length: 0` (the `GET`'s is
            // not 0), and the response's end is written, so the connection goes on to the next.
            return Response(status: .ok, headers: headers, body: ResponseBody(contentLength: nil) { writer in try await writer.finish(nil) })
        }
    }

    /// The JSON snapshot's headers, but its length. `Vary` whether gzip or not: the same URL
    /// answers the SQLite file to another `Accept`, and gzip to another `Accept-Encoding`.
    private static func jsonHeaders(gzip: Bool) -> HTTPFields {
        var headers: HTTPFields = [.contentType: "application/json", .vary: "Accept, Accept-Encoding"]
        if gzip { headers[.contentEncoding] = "gzip" }
        return headers
    }

    /// Whether an `Accept` header names the SQLite snapshot (with a quality above 0).
    static func acceptsSQLite(_ accept: String?) -> Bool {
        guard let accept else { return false }
        return accept.split(separator: ",").contains { item in
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard parts.first == sqliteType else { return false }
            let quality = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            return quality > 0
        }
    }

    private func jsonSnapshot(_ request: Request, device: Device, context: Context) async throws -> Response {
        guard let slot = DeviceRequestCount.Slot(jsonSnapshotsPerDevice, device: device.id) else {
            throw SyncError(
                .unavailable,
                "this device has \(jsonSnapshotsPerDevice.limit) JSON snapshots under way already: read or close them before asking again",
                retryAfterSeconds: 1)
        }
        let gzip = Gzip.accepted(request.headers[.acceptEncoding])
        let headers = Self.jsonHeaders(gzip: gzip)
        let spooled: SpooledSnapshot
        do {
            spooled = try await spool.write(gzip: gzip, device: device.id)
        } catch {
            throw Self.answer(error, writing: "the JSON snapshot could not be written to its spool file")
        }
        let file: ResponseBody
        do {
            file = try await FileBody.load(path: spooled.path, channel: context.channel)
        } catch is FileBody.Missing {
            // The spool's directory went (shutdown, or re-made) under the request.
            throw SyncError.unavailable("the JSON snapshot's spool file was removed as it was opened: retry")
        } catch {
            throw Self.answer(error, writing: "the JSON snapshot's spool file could not be read")
        }
        // The body holds the spool file and the device's place: the file is removed and the
        // place given back when the body goes, sent or not.
        let body = ResponseBody(contentLength: spooled.size) { writer in
            let file = file
            try await file.write(writer)
            withExtendedLifetime((spooled, slot)) {}
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// What a snapshot answers when reading or writing it failed, the same for both forms. A
    /// store's refusal as it says; a `PostgreSQL` error `Database` did not map to 503 is not a
    /// passing state (a table missing, a column of another type): a 500 logged with PostgreSQL's
    /// own message, not a 503 retried for good whose message hides it. Anything else is the
    /// snapshot directory's (full, read-only, out of file descriptors): the operator's to mend,
    /// and worth a retry, `503` with `what` failed.
    private static func answer(_ error: any Error, writing what: String) -> any Error {
        switch error {
        case let error as StoreError: SyncError(error)
        case let error as PSQLError: error
        case is CancellationError: CancellationError()
        default: SyncError.unavailable("\(what): \(error)")
        }
    }

    /// - Parameter ranges: whether `Range` is taken (a `GET`) or ignored (a `HEAD`).
    private func sqliteSnapshot(_ request: Request, device: Device, context: Context, ranges: Bool = true) async throws -> Response {
        let file: SnapshotFileCatalog.File
        do {
            file = try await files.file()
        } catch {
            throw Self.answer(error, writing: "the snapshot file could not be built")
        }
        // Read after the file's records were: the device's change sets through this seq are in
        // them or committed after them (its catch-up brings those), so pending ones among them
        // are not replayed over the file (`SnapshotLoader`). One small query, none while sending.
        let lastSeq = try await authenticator.devices.info(device).lastSeq
        let gzip = Gzip.accepted(request.headers[.acceptEncoding]) && file.gzipSize != nil
        let (path, size, etag) = gzip ? (file.gzipPath, file.gzipSize ?? 0, file.gzipETag) : (file.path, file.size, file.etag)
        var headers: HTTPFields = [
            .contentType: Self.sqliteType, .eTag: etag, .acceptRanges: "bytes", .vary: "Accept, Accept-Encoding",
            .cacheControl: "no-cache",
        ]
        headers[SnapshotHeaders.revision] = String(file.revision)
        headers[SnapshotHeaders.schemaVersion] = String(file.schemaVersion)
        headers[SnapshotHeaders.digest] = file.digest
        headers[SnapshotHeaders.lastSeq] = String(lastSeq)
        if gzip { headers[.contentEncoding] = "gzip" }

        // A resumed download names the bytes it has; If-Range makes sure they are this file's.
        var range = ranges ? ByteRange.parse(request.headers[.range], size: size) : .whole
        if let ifRange = request.headers[.ifRange], ifRange != etag { range = .whole }
        // A file removed between `files.file()` and here.
        func load(_ range: ClosedRange<Int>? = nil) async throws -> ResponseBody {
            do {
                return try await FileBody.load(path: path, range: range, channel: context.channel)
            } catch is FileBody.Missing {
                throw SyncError.unavailable("the snapshot file was removed from its directory as it was opened: retry")
            } catch is FileBody.Shortened {
                throw SyncError.unavailable("the snapshot file changed as it was opened: retry")
            } catch {
                throw Self.answer(error, writing: "the snapshot file could not be read")
            }
        }
        switch range {
        case .whole:
            return Response(status: .ok, headers: headers, body: try await load())
        case .part(let bytes):
            headers[.contentRange] = "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(size)"
            return Response(status: .partialContent, headers: headers, body: try await load(bytes))
        case .unsatisfiable:
            let error = SyncError(.rangeNotSatisfiable, "the snapshot file has \(size) bytes; the range asked for starts past them")
            var response = try error.response(from: request, context: context)
            response.headers[.contentRange] = "bytes */\(size)"
            return response
        }
    }
}

/// The headers that describe a SQLite snapshot file.
enum SnapshotHeaders {
    /// The revision the file's records are at.
    static let revision = HTTPField.Name("Revsync-Snapshot-Revision")!
    /// The schema version the file's tables follow.
    static let schemaVersion = HTTPField.Name("Revsync-Snapshot-Schema-Version")!
    /// SHA-256 of the SQLite file (after inflating a gzip answer), lowercase hex.
    static let digest = HTTPField.Name("Revsync-Snapshot-SHA256")!
    /// The requesting device's last seq the server had handled when the answer began (at or
    /// after the file's revision): its change sets through it are in the file or come after it.
    static let lastSeq = HTTPField.Name("Revsync-Device-Last-Seq")!
}
