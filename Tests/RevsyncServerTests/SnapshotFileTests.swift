import Crypto
import Foundation
import GRDB
import Hummingbird
import NIOCore
import PostgresNIO
import RevsyncGzip
import RevsyncRules
import RevsyncSnapshotFile
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// `GET /snapshot` as a SQLite file: what it holds, how it is sent, and what it spares PostgreSQL.
@Suite(.timeLimit(.minutes(3))) struct SnapshotFileTests {
    static let sqlite: HTTPFields = [.accept: "application/vnd.sqlite3"]

    /// The file's bytes and headers, fetched as a device does (without gzip unless asked).
    static func fetch(_ harness: TestHarness, _ device: TestDevice, headers extra: HTTPFields = [:]) async throws -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        var headers = sqlite
        headers[.authorization] = "Bearer \(device.token)"
        for field in extra { headers[field.name] = field.value }
        return try await harness.client.execute(uri: "/snapshot", method: .get, headers: headers, body: nil) { ($0.status, $0.headers, $0.body) }
    }

    static func sha256(_ bytes: ByteBuffer) -> String { FileDigest.hex(SHA256.hash(data: Data(bytes.readableBytesView))) }

    static func save(_ bytes: ByteBuffer) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-test-\(UUID().uuidString).sqlite").path
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes.readableBytesView)) else { throw TestSetupError("cannot write \(path)") }
        return path
    }

    /// Every record of `entity` in PostgreSQL, read as the snapshot reads them.
    static func postgresRecords(_ harness: TestHarness, _ entity: Entity) async throws -> [Int64: StoredRecord] {
        let columns = RecordColumns(entity)
        let rows = try await harness.rows(PostgresQuery(unsafeSQL: "SELECT \(columns.selectList) FROM \(columns.table) AS t"))
        return Dictionary(uniqueKeysWithValues: try rows.map { row in let record = try columns.decode(row); return (record.id, record) })
    }

    /// Every record of `entity` in the file, read back as a device reads its own.
    static func fileRecords(_ queue: DatabaseQueue, _ entity: Entity) async throws -> [Int64: StoredRecord] {
        try await queue.read { db in
            var records: [Int64: StoredRecord] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT * FROM \"\(entity.name)\"") {
                var values: Attributes = [:]
                for attribute in entity.attributes { values[attribute.name] = JSONValue(row[attribute.name] as DatabaseValue, as: attribute.type) }
                let id: Int64 = row["id"]
                records[id] = StoredRecord(id: id, revision: row["revision"], values: values)
            }
            return records
        }
    }

    @Test func theFileEqualsTheDatasetAtItsRevision() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            _ = try await harness.seedBasics(admin, seq: 2)
            let head = try await harness.head()
            _ = try await harness.sync(admin, from: head, [
                changeSet(seq: 3, ("notes", EntityChanges(create: [-1], attributes: [-1: ["author_id": .integer(basics.user), "body": "fast\u{1F3C3} \"quoted\"", "pinned": true]]))),
                changeSet(seq: 4, ("users", EntityChanges(update: [basics.user], attributes: [basics.user: ["revision": .integer(basics.revision), "date_of_birth": "2001-02-03T04:05:06.789+02:00"]]))),
            ])
            // Volume, written straight into the table (the file reads tables, not the log).
            _ = try await harness.rows(PostgresQuery(unsafeSQL: """
                INSERT INTO notes (revision, rs_writer, body, pinned) SELECT 1, 0, 'note ' || g, g % 2 = 0 FROM generate_series(1, 3000) AS g
                """))
            let expectedHead = try await harness.head()

            let (status, headers, body) = try await Self.fetch(harness, admin)
            #expect(status == .ok)
            #expect(headers[.contentType] == "application/vnd.sqlite3")
            #expect(headers[.contentEncoding] == nil)
            #expect(headers[SnapshotHeaders.revision] == String(expectedHead))
            #expect(headers[SnapshotHeaders.schemaVersion] == String(harness.server.schema.version))
            #expect(headers[SnapshotHeaders.digest] == Self.sha256(body))
            #expect(headers[SnapshotHeaders.lastSeq] == "4", "the admin's seqs 1…4 are in the file: none is replayed over it")
            #expect(headers[.acceptRanges] == "bytes")
            #expect(headers[.contentLength] == String(body.readableBytes))
            // The JSON snapshot says the same, read in its own transaction.
            let json = try await harness.client.execute(
                uri: "/snapshot", method: .get, headers: [.authorization: "Bearer \(admin.token)"], body: nil
            ) { try JSONDecoder().decode(SyncResponse.self, from: Data($0.body.readableBytesView)) }
            #expect(json.lastSeq == 4)

            let path = try Self.save(body)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let tables = harness.server.schema.entities.map { SnapshotTable(name: $0.name, attributes: $0.attributes) }
            let meta = try SnapshotFileCheck.check(path: path, tables: tables, schemaVersion: harness.server.schema.version)
            #expect(meta.revision == expectedHead)
            let queue = try DatabaseQueue(path: path)
            var compared = 0
            for entity in harness.server.schema.entities {
                let inPostgres = try await Self.postgresRecords(harness, entity)
                let inFile = try await Self.fileRecords(queue, entity)
                #expect(inFile == inPostgres, "\(entity.name) differs")
                compared += inPostgres.count
            }
            try queue.close()
            #expect(compared > 3000)

            // The gzip copy inflates to the same bytes.
            let (_, zipped, gzipBody) = try await Self.fetch(harness, admin, headers: [.acceptEncoding: "gzip"])
            #expect(zipped[.contentEncoding] == "gzip")
            #expect(zipped[.eTag] != headers[.eTag])
            #expect(gzipBody.readableBytes < body.readableBytes)
            #expect(try Gzip.inflate(gzipBody, maxSize: 1 << 30) == body)
        }
    }

    @Test func aRangeRequestResumesOnlyTheSameFile() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            _ = try await harness.seedBasics(admin)
            let (_, headers, whole) = try await Self.fetch(harness, admin)
            let etag = try #require(headers[.eTag])
            let size = whole.readableBytes

            let (partStatus, partHeaders, rest) = try await Self.fetch(harness, admin, headers: [.range: "bytes=1000-", .ifRange: etag])
            #expect(partStatus == .partialContent)
            #expect(partHeaders[.contentRange] == "bytes 1000-\(size - 1)/\(size)")
            #expect(rest == whole.getSlice(at: 1000, length: size - 1000))

            // A tag of another file: the whole of this one.
            let (otherStatus, _, again) = try await Self.fetch(harness, admin, headers: [.range: "bytes=1000-", .ifRange: "\"r0-0000000000000000\""])
            #expect(otherStatus == .ok && again == whole)

            let (pastStatus, pastHeaders, pastBody) = try await Self.fetch(harness, admin, headers: [.range: "bytes=\(size)-"])
            #expect(pastStatus == .rangeNotSatisfiable)
            #expect(pastHeaders[.contentRange] == "bytes */\(size)")
            #expect(try harness.error(pastBody).error == "range_not_satisfiable")

            // The gzip copy has its own tag and its own byte ranges.
            let (_, gzipHeaders, gzipWhole) = try await Self.fetch(harness, admin, headers: [.acceptEncoding: "gzip"])
            let gzipTag = try #require(gzipHeaders[.eTag])
            let (gzipStatus, _, gzipRest) = try await Self.fetch(
                harness, admin, headers: [.acceptEncoding: "gzip", .range: "bytes=100-", .ifRange: gzipTag])
            #expect(gzipStatus == .partialContent)
            var joined = gzipWhole.getSlice(at: 0, length: 100)!
            joined.writeImmutableBuffer(gzipRest)
            #expect(try Gzip.inflate(joined, maxSize: 1 << 30) == whole)
        }
    }

    /// A JSON snapshot's spool file goes when the last reference to it does: the answer's body
    /// holds it, and a body Hummingbird drops unsent (the client left before the head could be
    /// written) must not leave a copy of the dataset behind; a sent one leaves none either.
    @Test func aSpooledSnapshotIsRemovedWithItsLastReferenceSentOrNot() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            _ = try await harness.seedBasics(admin)
            var spooled: SpooledSnapshot? = try await harness.server.snapshotSpool.write(gzip: true)
            let path = try #require(spooled?.path)
            #expect(FileManager.default.fileExists(atPath: path))
            #expect((spooled?.size ?? 0) > 0)
            spooled = nil
            #expect(!FileManager.default.fileExists(atPath: path), "the spool file outlived its last reference")

            let work = try harness.server.snapshotSpool.work.path()
            func spoolFiles() throws -> [String] {
                try FileManager.default.contentsOfDirectory(atPath: work).filter { $0.hasSuffix(".json") || $0.hasSuffix(".json.gz") }
            }
            let (status, body) = try await harness.client.execute(
                uri: "/snapshot", method: .get, headers: [.authorization: "Bearer \(admin.token)"], body: nil) { ($0.status, $0.body) }
            #expect(status == .ok && body.readableBytes > 0)
            try await eventually("the sent snapshot's spool file is removed") { try spoolFiles().isEmpty }
        }
    }

    /// `HEAD /snapshot`: the SQLite file's `GET` headers, length and tag among them, and no
    /// body, whatever `Range` says; the JSON snapshot's type, and no dataset written to the
    /// spool for nothing.
    @Test func headDescribesTheSnapshotWithoutSendingOrSpoolingIt() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            _ = try await harness.seedBasics(admin)
            for extra: HTTPFields in [[:], [.acceptEncoding: "gzip"], [.range: "bytes=100-"]] {
                var headers = Self.sqlite
                headers[.authorization] = "Bearer \(admin.token)"
                for field in extra { headers[field.name] = field.value }
                // A HEAD ignores Range (RFC 9110, 14.2): it describes the whole file.
                var getExtra = extra
                getExtra[.range] = nil
                let (getStatus, getHeaders, getBody) = try await Self.fetch(harness, admin, headers: getExtra)
                let (status, head, body) = try await harness.client.execute(uri: "/snapshot", method: .head, headers: headers, body: nil) {
                    ($0.status, $0.headers, $0.body)
                }
                #expect(status == getStatus, "\(extra)")
                #expect(body.readableBytes == 0, "\(extra)")
                #expect(head[.contentLength] == String(getBody.readableBytes), "\(extra)")
                var without = head, getWithout = getHeaders
                without[.date] = nil
                getWithout[.date] = nil
                #expect(without == getWithout, "\(extra)")
            }

            let work = try harness.server.snapshotSpool.work.path()
            func spooled() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: work).filter { $0.hasSuffix(".json") || $0.hasSuffix(".json.gz") } }
            let before = try spooled()
            for gzip in [false, true] {
                var headers: HTTPFields = [.authorization: "Bearer \(admin.token)"]
                if gzip { headers[.acceptEncoding] = "gzip" }
                try await harness.client.execute(uri: "/snapshot", method: .head, headers: headers, body: nil) { response in
                    #expect(response.status == .ok)
                    #expect(response.headers[.contentType] == "application/json")
                    #expect(response.headers[.contentEncoding] == (gzip ? "gzip" : nil))
                    #expect(response.headers[.vary] == "Accept, Accept-Encoding")
                    #expect(response.body.readableBytes == 0)
                }
            }
            #expect(try spooled() == before, "a HEAD wrote the JSON snapshot to the spool")
            // Without a token it is refused as the GET is.
            try await harness.client.execute(uri: "/snapshot", method: .head, headers: [:], body: nil) { response in
                #expect(response.status == .unauthorized)
            }
        }
    }

    @Test func aSharedDirectoryNeverServesAnotherDatabasesFile() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-shared-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try await withTestServer(configure: { $0.snapshotDirectory = directory }) { harness in
            let admin = try await harness.register("admin", name: "admin")
            _ = try await harness.seedBasics(admin)
            return try await Self.fetch(harness, admin).1[SnapshotHeaders.digest]
        }
        #expect(first != nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).contains { $0.hasSuffix(".sqlite") }, "the file stays")
        // Another database (an empty one) with the same directory: its own file, not the one left there.
        try await withTestServer(configure: { $0.snapshotDirectory = directory }) { harness in
            let device = try await harness.register("viewer", name: "viewer")
            let (status, headers, _) = try await Self.fetch(harness, device)
            #expect(status == .ok)
            #expect(headers[SnapshotHeaders.revision] == String(try await harness.head()))
            #expect(headers[SnapshotHeaders.digest] != first)
            #expect(await harness.server.snapshotFiles.builds == 1)
        }
    }

    /// The file served, removed from the directory under the instance (another instance
    /// sharing it retired it, or a cleaner of /tmp took it), with the head where it was: the
    /// next request gets a whole file again, not 404 until the head moves.
    @Test func aServedFileRemovedUnderTheInstanceIsBuiltAgain() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-removed-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestServer(configure: { $0.snapshotDirectory = directory }) { harness in
            let admin = try await harness.register("admin", name: "admin")
            _ = try await harness.seedBasics(admin)
            let (status, headers, bytes) = try await Self.fetch(harness, admin)
            #expect(status == .ok)
            for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
                try FileManager.default.removeItem(atPath: directory + "/" + name)
            }
            let (again, againHeaders, againBytes) = try await Self.fetch(harness, admin)
            #expect(again == .ok)
            #expect(againHeaders[SnapshotHeaders.revision] == headers[SnapshotHeaders.revision])
            #expect(againBytes.readableBytes > 0 && Self.sha256(againBytes) == againHeaders[SnapshotHeaders.digest])
            #expect(bytes.readableBytes > 0)
            #expect(await harness.server.snapshotFiles.builds == 2)
        }
    }

    /// A directory the instances share, after one of them was killed: its work directory (a
    /// build's scratch file, a JSON spool) and a file it replaced but could not remove yet are
    /// removed by the others' sweep; what a live instance holds, and files within their grace, stay.
    @Test func aSweepRemovesWhatAGoneInstanceLeftAndKeepsWhatIsInUse() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-sweep-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestServer(configure: { $0.snapshotDirectory = directory }) { harness in
            let admin = try await harness.register("admin", name: "admin")
            _ = try await harness.seedBasics(admin)
            let served = try await harness.server.snapshotFiles.file()
            let fm = FileManager.default
            // The killed instance: its work directory, unlocked, with what it was writing.
            var killed: SnapshotWorkDirectory? = SnapshotWorkDirectory(parent: directory)
            let killedPath = try #require(try killed?.path())
            _ = fm.createFile(atPath: killedPath + "/building-\(UUID().uuidString.lowercased()).sqlite", contents: Data(count: 4096))
            _ = fm.createFile(atPath: killedPath + "/snapshot-\(UUID().uuidString.lowercased()).json.gz", contents: Data(count: 4096))
            killed = nil
            // Another instance that runs.
            let running = SnapshotWorkDirectory(parent: directory)
            let runningPath = try running.path()
            // Two files of this database published before the one served, the older one replaced
            // two hours ago, the other 100 s ago (within the 600 s grace).
            func earlier(_ revision: Int64, _ digest: Character, secondsAgo: Double) throws -> String {
                let file = SnapshotFileCatalog.File(
                    directory: directory, database: served.database, revision: revision, schemaVersion: served.schemaVersion,
                    digest: String(repeating: digest, count: 64), size: 0, gzipSize: nil)
                try fm.copyItem(atPath: served.path, toPath: file.path)
                try fm.copyItem(atPath: served.gzipPath, toPath: file.gzipPath)
                for path in [file.path, file.gzipPath] {
                    try fm.setAttributes([.modificationDate: Date().addingTimeInterval(-secondsAgo)], ofItemAtPath: path)
                }
                return file.name
            }
            let replacedLongAgo = try earlier(0, "1", secondsAgo: 10_000)
            let replacedLately = try earlier(0, "2", secondsAgo: 7_200)
            try fm.setAttributes([.modificationDate: Date().addingTimeInterval(-100)], ofItemAtPath: served.path)

            await harness.server.snapshotFiles.sweep()
            let names = Set(try fm.contentsOfDirectory(atPath: directory))
            #expect(!names.contains(replacedLongAgo) && !names.contains(replacedLongAgo + ".gz"), "replaced for two hours")
            #expect(names.contains(replacedLately) && names.contains(replacedLately + ".gz"), "replaced 100 s ago")
            #expect(names.contains(served.name) && names.contains(served.name + ".gz"))
            #expect(!fm.fileExists(atPath: killedPath), "the killed instance's work directory")
            #expect(fm.fileExists(atPath: runningPath), "the running instance's")
            #expect(fm.fileExists(atPath: try harness.server.snapshotFiles.work.path()), "its own")
            let (status, headers, bytes) = try await Self.fetch(harness, admin)
            #expect(status == .ok)
            #expect(Self.sha256(bytes) == headers[SnapshotHeaders.digest])
            withExtendedLifetime(running) {}
        }
    }

    /// A file ahead of the database's head (the database was restored from a backup, the
    /// directory kept): its records are not the database's, so it is rebuilt and never served.
    @Test func aFileAheadOfTheDatabaseIsNotServed() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-ahead-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestServer(configure: { $0.snapshotDirectory = directory }) { harness in
            let admin = try await harness.register("admin", name: "admin")
            _ = try await harness.seedBasics(admin)
            let head = try await harness.head()
            let served = try await harness.server.snapshotFiles.file()
            #expect(served.revision == head)
            // The file the database had before it was restored, 50 revisions on, and not the one
            // served (so that the instance looks for another).
            let ahead = SnapshotFileCatalog.File(
                directory: directory, database: served.database, revision: head + 50, schemaVersion: served.schemaVersion,
                digest: String(repeating: "e", count: 64), size: 0, gzipSize: nil)
            try FileManager.default.moveItem(atPath: served.path, toPath: ahead.path)
            try FileManager.default.moveItem(atPath: served.gzipPath, toPath: ahead.gzipPath)

            let (status, headers, bytes) = try await Self.fetch(harness, admin)
            #expect(status == .ok)
            #expect(headers[SnapshotHeaders.revision] == String(head))
            #expect(Self.sha256(bytes) == headers[SnapshotHeaders.digest])
            #expect(await harness.server.snapshotFiles.builds == 2)
        }
    }

    /// A build PostgreSQL refuses for good (a table renamed by hand) is a server error, as the
    /// JSON snapshot's read is: not a 503 that devices retry for ever, its message hiding
    /// PostgreSQL's (a `PSQLError` prints a generic description).
    @Test func aBuildThatPostgreSQLRefusesForGoodIsAServerError() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            _ = try await harness.seedBasics(admin)
            _ = try await harness.rows("ALTER TABLE notes RENAME TO notes_away")
            let (status, headers, body) = try await Self.fetch(harness, admin)
            #expect(status == .internalServerError, "\(String(buffer: body))")
            #expect(headers[.retryAfter] == nil)
            let json = try await harness.client.execute(
                uri: "/snapshot", method: .get, headers: [.authorization: "Bearer \(admin.token)"], body: nil) { $0.status }
            #expect(json == .internalServerError)
            _ = try await harness.rows("ALTER TABLE notes_away RENAME TO notes")
            #expect(try await Self.fetch(harness, admin).0 == .ok)
        }
    }

    @Test func requestsShareOneBuildAndTheOldFileIsServedWhileTheNextIsBuilt() async throws {
        try await withTestServer(configure: { $0.snapshotRebuildRevisions = 2 }) { harness in
            let admin = try await harness.register("admin", name: "admin")
            _ = try await harness.seedBasics(admin)
            let first = try await harness.head()
            let revisions = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<6 { group.addTask { try await Self.fetch(harness, admin).1[SnapshotHeaders.revision] } }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
            #expect(Set(revisions) == [String(first)])
            #expect(await harness.server.snapshotFiles.builds == 1)

            // One revision on: still fresh enough.
            _ = try await harness.seedBasics(admin, seq: 2)
            try await Task.sleep(for: .milliseconds(1100))  // past the head check's interval
            #expect(try await Self.fetch(harness, admin).1[SnapshotHeaders.revision] == String(first))
            #expect(await harness.server.snapshotFiles.builds == 1)
            // Two on: this request starts a rebuild and gets the old file; a later one the new.
            _ = try await harness.seedBasics(admin, seq: 3)
            let head = try await harness.head()
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await Self.fetch(harness, admin).1[SnapshotHeaders.revision] == String(first))
            try await eventually("the rebuilt file served") {
                try await Self.fetch(harness, admin).1[SnapshotHeaders.revision] == String(head)
            }
            #expect(await harness.server.snapshotFiles.builds == 2)
        }
    }
}

/// The snapshot files on a real socket: slow readers, and a rebuild under a download.
/// Six minutes: ten JSON snapshots of 8 MB are read one at a time (`SnapshotSpool`), which
/// under the whole suite's load has taken over a minute.
@Suite(.timeLimit(.minutes(6))) struct SnapshotFileConnectionTests {
    static func get(token: String, sqlite: Bool) -> String {
        "GET /snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
            + (sqlite ? "Accept: application/vnd.sqlite3\r\n" : "") + "\r\n"
    }

    /// About 8 MB of JSON: more than a socket's buffers hold.
    static func seedVolume(_ live: LiveServer) async throws {
        let logger = live.server.database.logger
        // Not bounded by the server's statement timeout (5 s in one test): on two cores loaded by
        // the whole suite this insert has taken longer, and the test then failed in its setup.
        _ = try await live.server.postgres.withConnection { connection in
            try await connection.query("BEGIN", logger: logger)
            try await connection.query("SET LOCAL statement_timeout = 0", logger: logger)
            try await connection.query(
                "INSERT INTO notes (revision, rs_writer, body, pinned) SELECT 1, 0, repeat('n', 380) || g, false FROM generate_series(1, 20000) AS g",
                logger: logger)
            try await connection.query("COMMIT", logger: logger)
        }
    }

    static func headerEnd(_ bytes: [UInt8]) -> Int? {
        let marker: [UInt8] = Array("\r\n\r\n".utf8)
        guard bytes.count >= marker.count else { return nil }
        for index in 0...(bytes.count - marker.count) where Array(bytes[index..<(index + marker.count)]) == marker { return index + marker.count }
        return nil
    }

    static func header(_ name: String, in head: String) -> String? {
        head.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
            .map { $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces) }
    }

    @Test func slowSnapshotReadersHoldNoDatabaseConnection() async throws {
        try await withLiveServer(configure: { $0.databaseConnections = 4; $0.databaseTimeout = .seconds(5) }) { live in
            try await Self.seedVolume(live)
            let (_, token) = try await live.server.devices.register(name: "slow", user: "slow", role: "member")
            let port = try #require(live.baseURL.port)
            // Twenty downloads, JSON and SQLite, each read up to its status line and then left
            // alone; a device of its own each (one device holds at most 4 JSON snapshots).
            var readers: [RawConnection] = []
            for index in 0..<20 {
                let (_, own) = try await live.server.devices.register(name: "slow \(index)", user: "slow", role: "member")
                let reader = try RawConnection(port: port, receiveBuffer: 4096)
                reader.send(Self.get(token: own, sqlite: index % 2 == 1))
                readers.append(reader)
            }
            // The JSON snapshots are read one at a time, in the order their requests reached the
            // gate, not the order sent: the first sent may be the last read, nine reads later.
            let started = ContinuousClock.now
            for (index, reader) in readers.enumerated() {
                let (text, _) = await reader.readUntilClosed(timeout: .seconds(240), orUntil: "HTTP/1.1 200")
                #expect(
                    text.hasPrefix("HTTP/1.1 200"),
                    "download \(index) (\(index % 2 == 1 ? "SQLite" : "JSON")) after \(ContinuousClock.now - started): \(text.prefix(300))")
            }
            // Every reader holds its answer; a write (a catch-up alone may need no database at all)
            // still gets a connection.
            let write = #"{"maxRevision":0,"changeSets":[{"seq":1,"types":["notes"],"notes":{"create":[-1],"update":[],"delete":[],"attributes":{"-1":{"body":"b","pinned":false}}}}]}"#
            let sync = try RawConnection(port: port)
            sync.send("POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(write.utf8.count)\r\n\r\n" + write)
            let (answer, _) = await sync.readUntilClosed(timeout: .seconds(30), orUntil: "\"maxRevision\"")
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(300))")
            #expect(answer.contains("\"__oldId__\":-1"), "the note committed")
            withExtendedLifetime(readers) {}
        }
    }

    /// One device holds at most `REVSYNC_MAX_REQUESTS_PER_DEVICE` JSON snapshots under way
    /// (each a spool file the size of the dataset, until its client has read it): the next is
    /// `503` with `Retry-After`, while the SQLite file and another device's are served, and an
    /// answer gives its place back once sent. Two downloads under way are stood for by their
    /// places taken in the instance's count: unread sockets do not hold a download for sure
    /// (under load NIO may take a whole body before the client reads any of it).
    @Test func oneDeviceHoldsAtMostItsLimitOfJSONSnapshots() async throws {
        try await withTestServer(configure: { $0.maxRequestsPerDevice = 2 }) { harness in
            let greedy = try await harness.register("viewer", name: "greedy")
            _ = try await harness.seedBasics(try await harness.register("admin", name: "admin"))
            let device = try #require(try await harness.server.devices.authenticate(token: greedy.token)).id
            let count = harness.server.jsonSnapshotsPerDevice
            func json(_ token: String) async throws -> (HTTPResponse.Status, HTTPFields, String) {
                try await harness.client.execute(uri: "/snapshot", method: .get, headers: [.authorization: "Bearer \(token)"], body: nil) {
                    ($0.status, $0.headers, String(buffer: $0.body))
                }
            }
            // The places free now (taken and given back at once).
            func free() -> Int {
                var taken = 0
                while count.enter(device) { taken += 1 }
                for _ in 0..<taken { count.leave(device) }
                return taken
            }
            // Under the limit: served, and its place given back once sent (the body's end, which
            // gives it back, may come a moment after the client has the last byte).
            #expect(try await json(greedy.token).0 == .ok)
            try await eventually("the sent snapshot gives its place back") { free() == 2 }
            #expect(count.enter(device) && count.enter(device))
            // Two under way: the next is refused.
            let (status, headers, body) = try await json(greedy.token)
            #expect(status == .serviceUnavailable)
            #expect(headers[.retryAfter] == "1")
            #expect(body.contains("2 JSON snapshots under way"), "\(body)")
            // The SQLite file (one shared file, no spool) and another device are not held back.
            #expect(try await SnapshotFileTests.fetch(harness, greedy).0 == .ok)
            let other = try await harness.register("viewer", name: "other")
            #expect(try await json(other.token).0 == .ok)
            // One ends: served again.
            count.leave(device)
            #expect(try await json(greedy.token).0 == .ok)
            try await eventually("the served snapshot gives its place back") { free() == 1 }
        }
    }

    @Test func aRebuildWhileADownloadIsInProgressDoesNotBreakIt() async throws {
        // Replaced files go at once: the download in progress must not need the name any more.
        try await withLiveServer(configure: { $0.snapshotKeepReplaced = .zero }) { live in
            try await Self.seedVolume(live)
            let (_, token) = try await live.server.devices.register(name: "patient", user: "patient", role: "member")
            let old = try await live.server.snapshotFiles.file()
            let reader = try RawConnection(port: try #require(live.baseURL.port), receiveBuffer: 4096)
            reader.send(Self.get(token: token, sqlite: true))
            var bytes = await reader.readBytes(timeout: .seconds(30)) { Self.headerEnd($0) != nil }
            let end = try #require(Self.headerEnd(bytes))
            let head = String(decoding: bytes[..<end], as: UTF8.self)
            let length = try #require(Self.header("Content-Length", in: head).flatMap { Int($0) })
            let digest = try #require(Self.header("Revsync-Snapshot-SHA256", in: head))
            #expect(digest == old.digest)
            #expect(length > 1_000_000)

            // One commit, then the rebuild.
            let (_, adminToken) = try await live.server.devices.register(name: "admin", user: "admin", role: "admin")
            let commit = #"{"maxRevision":0,"changeSets":[{"seq":1,"types":["leagues"],"leagues":{"create":[-1],"update":[],"delete":[],"attributes":{"-1":{"name":"New"}}}}]}"#
            let writer = try RawConnection(port: try #require(live.baseURL.port))
            writer.send("POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(adminToken)\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(commit.utf8.count)\r\n\r\n" + commit)
            let (committed, _) = await writer.readUntilClosed(timeout: .seconds(30), orUntil: "\"maxRevision\"")
            #expect(committed.hasPrefix("HTTP/1.1 200"))
            let new = try await live.server.snapshotFiles.rebuild()
            #expect(new.digest != old.digest)
            #expect(!FileManager.default.fileExists(atPath: old.path), "the replaced file is gone")

            bytes += await reader.readBytes(timeout: .seconds(60)) { $0.count >= length - (bytes.count - end) }
            let body = bytes[end...]
            #expect(body.count == length)
            #expect(FileDigest.hex(SHA256.hash(data: Data(body))) == digest, "the download finished with the file it started on")
        }
    }
}
