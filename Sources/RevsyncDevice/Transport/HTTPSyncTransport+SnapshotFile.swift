import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import RevsyncGzip
import RevsyncSnapshotFile

extension HTTPSyncTransport {
    /// Downloads the SQLite snapshot to `path` (see `SyncTransport.snapshotFile`).
    ///
    /// The bytes go to `path + ".part"` as they arrive, and what the answer said of them
    /// (its tag, encoding, digest and revision) to `path + ".part.json"`, so that a call
    /// after a failure resumes with `Range` and `If-Range`. The server answers the rest
    /// (`206`) or, when the file changed meanwhile, all of a new one (`200`). A gzip answer
    /// is inflated once complete; the result must match the server's SHA-256.
    public func snapshotFile(token: String, to path: String, minimumRevision: Int64) async throws -> SnapshotFileDownload? {
        let part = path + ".part"
        let statePath = path + ".part.json"
        let files = FileManager.default
        var resume = PartialSnapshot.read(statePath)
        let have = resume == nil ? 0 : (fileSize(atPath: part) ?? 0)
        if have == 0 || (resume?.revision ?? 0) < minimumRevision {
            if resume != nil { PartialSnapshot.remove(at: path) }
            resume = nil
        }

        var request = HTTPClientRequest(url: base + "/snapshot")
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Accept", value: PartialSnapshot.contentType)
        if configuration.acceptGzip { request.headers.add(name: "Accept-Encoding", value: "gzip") }
        if let resume {
            request.headers.add(name: "Range", value: "bytes=\(have)-")
            request.headers.add(name: "If-Range", value: resume.etag)
        }

        let started = ContinuousClock.now
        var sizes = HTTPExchange(path: "/snapshot", changeSets: 0)
        sizes.snapshotFile = true
        defer {
            if let observer = configuration.observer {
                sizes.duration = ContinuousClock.now - started
                observer(sizes)
            }
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: .init(configuration.snapshotTimeout))
        } catch let error as CancellationError {
            throw error
        } catch {
            throw SyncTransportError.connection("GET /snapshot (SQLite): \(error)")
        }
        let status = Int(response.status.code)
        sizes.status = status

        let state: PartialSnapshot
        let append: Bool
        switch status {
        case 200:
            // A server that only has the JSON snapshot answers with it: the caller loads that instead.
            guard response.headers["Content-Type"].contains(where: { $0.lowercased().hasPrefix(PartialSnapshot.contentType) }) else {
                return nil
            }
            guard let fresh = PartialSnapshot(headers: response.headers) else {
                throw SyncTransportError.invalidResponse("GET /snapshot (SQLite): the answer lacks its ETag, revision or SHA-256")
            }
            // Older than the device: the JSON snapshot, read at the head, instead.
            guard fresh.revision >= minimumRevision else { return nil }
            state = fresh
            append = false
        case 206:
            let range = response.headers["Content-Range"].first ?? ""
            guard let resume, response.headers["ETag"].first == resume.etag, range.hasPrefix("bytes \(have)-") else {
                PartialSnapshot.remove(at: path)
                throw SyncTransportError.invalidResponse("GET /snapshot (SQLite): the server resumed other bytes (\(range)); starting again")
            }
            state = resume
            append = true
        case 416:
            PartialSnapshot.remove(at: path)
            throw SyncTransportError.invalidResponse("GET /snapshot (SQLite): the partial download no longer matches the file; starting again")
        default:
            let body = (try? await response.body.collect(upTo: 64 * 1024)) ?? ByteBuffer()
            throw ErrorResponseMapper.error(status: status, body: Array(body.readableBytesView), retryAfter: response.headers["Retry-After"].first)
        }

        // Read by the server after the file's records, on this answer as on the first.
        let lastSeq = response.headers["Revsync-Device-Last-Seq"].first.flatMap { Int64($0) }
        if !append {
            try? files.removeItem(atPath: part)
            guard files.createFile(atPath: part, contents: nil) else {
                throw SyncTransportError.invalidResponse("cannot create \(part)")
            }
            try state.write(to: statePath)
        }
        guard let output = FileHandle(forWritingAtPath: part) else { throw SyncTransportError.invalidResponse("cannot open \(part)") }
        var received = 0
        do {
            defer { try? output.close() }
            try output.seekToEnd()
            for try await chunk in response.body {
                try output.write(contentsOf: Data(chunk.readableBytesView))
                received += chunk.readableBytes
            }
        } catch let error as CancellationError {
            throw error
        } catch {
            // What arrived stays for the next call to resume. No whole answer arrived.
            sizes.responseWireBytes = received
            sizes.status = nil
            throw SyncTransportError.connection("GET /snapshot (SQLite) cut short after \(have + received) bytes: \(error)")
        }
        sizes.responseWireBytes = received

        // Complete: inflate, check the digest, and only then put the file at `path`.
        defer { PartialSnapshot.remove(at: path, keepingResult: true) }
        let scratch = path + ".checking"
        let digest: String
        do {
            if state.gzip {
                try PartialSnapshot.inflate(part, to: scratch)
            } else {
                try? files.removeItem(atPath: scratch)
                try files.moveItem(atPath: part, toPath: scratch)
            }
            digest = try FileDigest.sha256(ofFileAt: scratch)
        } catch {
            try? files.removeItem(atPath: scratch)
            throw SyncTransportError.invalidResponse("GET /snapshot (SQLite): the download is not a complete \(state.gzip ? "gzip " : "")file: \(error)")
        }
        guard digest == state.digest else {
            try? files.removeItem(atPath: scratch)
            throw SyncTransportError.invalidResponse("GET /snapshot (SQLite): the file's SHA-256 is \(digest), the server's \(state.digest)")
        }
        try? files.removeItem(atPath: path)
        try files.moveItem(atPath: scratch, toPath: path)
        let bytes = fileSize(atPath: path) ?? 0
        sizes.responseRawBytes = bytes
        return SnapshotFileDownload(
            path: path, revision: state.revision, schemaVersion: state.schemaVersion, digest: digest, etag: state.etag, bytes: bytes,
            receivedBytes: received, resumed: append, lastSeq: lastSeq)
    }
}

/// What a download of the SQLite snapshot learnt from its first answer, kept beside
/// the bytes so that another call can resume it.
struct PartialSnapshot: Codable, Sendable, Hashable {
    static let contentType = "application/vnd.sqlite3"

    var etag: String
    var gzip: Bool
    var digest: String
    var revision: Int64
    var schemaVersion: Int

    init(etag: String, gzip: Bool, digest: String, revision: Int64, schemaVersion: Int) {
        self.etag = etag
        self.gzip = gzip
        self.digest = digest
        self.revision = revision
        self.schemaVersion = schemaVersion
    }

    init?(headers: HTTPHeaders) {
        guard let etag = headers["ETag"].first, let digest = headers["Revsync-Snapshot-SHA256"].first,
            let revision = headers["Revsync-Snapshot-Revision"].first.flatMap({ Int64($0) }),
            let version = headers["Revsync-Snapshot-Schema-Version"].first.flatMap({ Int($0) })
        else { return nil }
        self.etag = etag
        self.gzip = headers["Content-Encoding"].contains { $0.lowercased() == "gzip" }
        self.digest = digest.lowercased()
        self.revision = revision
        self.schemaVersion = version
    }

    static func read(_ path: String) -> PartialSnapshot? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(PartialSnapshot.self, from: data)
    }

    func write(to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: try JSONEncoder().encode(self)) else {
            throw SyncTransportError.invalidResponse("cannot write \(path)")
        }
    }

    /// Drops a partial download of `path` (and the file at `path` itself unless `keepingResult`).
    static func remove(at path: String, keepingResult: Bool = false) {
        for suffix in [".part", ".part.json", ".checking"] + (keepingResult ? [] : [""]) {
            try? FileManager.default.removeItem(atPath: path + suffix)
        }
    }

    /// Inflates the gzip file at `source` into `target`, 1 MiB of input at a time.
    static func inflate(_ source: String, to target: String) throws {
        let files = FileManager.default
        try? files.removeItem(atPath: target)
        guard files.createFile(atPath: target, contents: nil), let output = FileHandle(forWritingAtPath: target),
            let input = FileHandle(forReadingAtPath: source)
        else { throw SyncTransportError.invalidResponse("cannot inflate \(source) into \(target)") }
        defer {
            try? input.close()
            try? output.close()
        }
        let stream = try GunzipStream()
        while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
            try stream.inflate(ByteBuffer(bytes: chunk)) { piece in try output.write(contentsOf: Data(piece.readableBytesView)) }
        }
        try stream.finish()
    }
}
