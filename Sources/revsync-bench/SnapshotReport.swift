import Foundation

/// One kind of snapshot answer, plain and gzip.
struct AnswerFigures: Codable {
    /// `Content-Length` of each.
    let plainBytes: Int
    let gzipBytes: Int
    /// From each request to its headers: the server prepares the whole answer first.
    let plainHeadersSeconds: Double
    let gzipHeadersSeconds: Double

    init(plain: SnapshotAnswer, gzip: SnapshotAnswer) {
        plainBytes = plain.bytes
        gzipBytes = gzip.bytes
        plainHeadersSeconds = plain.headersSeconds
        gzipHeadersSeconds = gzip.headersSeconds
    }
}

/// Everything measured at one size, on a server of its own.
struct SnapshotSizeFigures: Codable {
    let records: Int
    /// Records of each entity.
    let counts: [String: Int]
    let seedSeconds: Double
    /// The head, and the SQLite file's revision.
    let revision: Int64
    /// From the first SQLite request to its headers: the server built the file meanwhile.
    let buildSeconds: Double
    /// The server warm and idle, before the first SQLite request.
    let serverBefore: ServerReading
    /// At that request's headers: the file built.
    let serverBuilt: ServerReading
    /// Once the SQLite and JSON answers, plain and gzip, have been sent to the bench.
    let serverAfterAnswers: ServerReading
    /// Once both devices have bootstrapped.
    let serverEnd: ServerReading
    /// The SQLite plain answer is the first request's, which waited for the build.
    let sqlite: AnswerFigures
    let json: AnswerFigures
    let jsonDevice: DeviceBootstrap.Result
    let sqliteDevice: DeviceBootstrap.Result
    /// Clients that stopped reading, on a fresh server (at the first size only).
    var slowReaders: SlowReaderFigures?

    /// How much the server's peak rose during the build.
    var buildPeakGrowthBytes: Int { serverBuilt.peakResidentBytes - serverBefore.peakResidentBytes }
    var buildCPUSeconds: Double { serverBuilt.cpuSeconds - serverBefore.cpuSeconds }
}

/// The server's resident size as clients stop reading its answers: the SQLite file's, then
/// the JSON snapshot's, each client on a device of its own.
struct SlowReaderFigures: Codable {
    /// Resident sizes of two rounds of the same readers, one after the other.
    struct Kind: Codable {
        let readers: Int
        let firstBefore: Int
        /// With every reader of the first round stopped, its connection open.
        let firstHolding: Int
        /// Once the first round closed.
        let secondBefore: Int
        let secondHolding: Int
        /// Once the second round closed.
        let after: Int

        /// Counts what the first answers leave behind besides the readers: high.
        var firstPerReader: Int { (firstHolding - firstBefore) / max(1, readers) }
        /// Reuses the first round's freed memory: low, and below zero when the allocator
        /// returned more than the readers took.
        var secondPerReader: Int { (secondHolding - secondBefore) / max(1, readers) }
    }

    let sqlite: Kind
    let json: Kind
}

/// One line of the snapshot table: a figure for JSON and for SQLite, their ratio, and the
/// target with whether it was met.
struct SnapshotFigure: Codable {
    let records: Int
    let figure: String
    let json: String
    let sqlite: String
    /// JSON over SQLite.
    let ratio: String
    let target: String?
    let met: Bool?
}

/// `revsync-bench --snapshot`: the JSON snapshot against the SQLite snapshot file.
struct SnapshotReport: Codable, ReportFile {
    let machine: String
    let date: String
    let server: String
    let sizes: [SnapshotSizeFigures]
    let figures: [SnapshotFigure]
    /// Whether the server's memory stayed flat across the sizes (nil with one size).
    let flatBuildMemory: Bool?

    /// A new device's SQLite bootstrap: 0.5 s at 100,000 records, 5 s at a million (judged from
    /// 100,000 on: below, the fixed costs of a bootstrap outweigh the records).
    static let deviceSecondsPerRecord = 5e-6
    static let deviceTargetFrom = 100_000
    /// The SQLite bootstrap's peak resident size, up to 100,000 records.
    static let devicePeakBytes = 60 << 20
    static let devicePeakUpTo = 100_000
    /// The server's build: 15 s at a million records (judged from a million on).
    static let buildSecondsPerRecord = 15e-6
    static let buildTargetFrom = 1_000_000
    /// Flat memory: the build's rise of the server's peak at the largest size is within this of
    /// its rise at the smallest.
    static let flatSlackBytes = 32 << 20
    /// A client that stops reading a snapshot: the server holds at most this for it, beyond
    /// what the kernel buffers (the project's own bound; no issue names one).
    static let slowReaderBytes = 256 << 10

    init(machine: String, date: String, server: String, sizes: [SnapshotSizeFigures]) {
        self.machine = machine
        self.date = date
        self.server = server
        self.sizes = sizes
        figures = sizes.flatMap(Self.figures)
        let bySize = sizes.sorted { $0.records < $1.records }
        if bySize.count >= 2, let smallest = bySize.first, let largest = bySize.last {
            flatBuildMemory = largest.buildPeakGrowthBytes <= smallest.buildPeakGrowthBytes + Self.flatSlackBytes
        } else {
            flatBuildMemory = nil
        }
    }

    private static func figures(_ size: SnapshotSizeFigures) -> [SnapshotFigure] {
        let json = size.jsonDevice, sqlite = size.sqliteDevice
        func row(_ figure: String, _ json: String, _ sqlite: String, ratio: String = "", target: String? = nil, met: Bool? = nil) -> SnapshotFigure {
            SnapshotFigure(records: size.records, figure: figure, json: json, sqlite: sqlite, ratio: ratio, target: target, met: met)
        }
        func times(_ figure: String, _ json: Double, _ sqlite: Double, target: Double? = nil) -> SnapshotFigure {
            row(figure, seconds(json), seconds(sqlite), ratio: ratio(json, sqlite),
                target: target.map { "≤ " + seconds($0) }, met: target.map { sqlite <= $0 })
        }
        func sizes(_ figure: String, _ json: Int, _ sqlite: Int, target: Int? = nil) -> SnapshotFigure {
            row(figure, bytes(json), bytes(sqlite), ratio: ratio(Double(json), Double(sqlite)),
                target: target.map { "≤ " + bytes($0) }, met: target.map { sqlite <= $0 })
        }
        let build = size.records >= buildTargetFrom ? buildSecondsPerRecord * Double(size.records) : nil
        let server = (before: size.serverBefore, built: size.serverBuilt)
        return [
            times("new device: bootstrap() (schema, gzip download, load)", json.seconds, sqlite.seconds,
                  target: size.records >= deviceTargetFrom ? deviceSecondsPerRecord * Double(size.records) : nil),
            sizes("  peak RSS of its process (VmHWM)", json.peakResidentBytes, sqlite.peakResidentBytes,
                  target: size.records <= devicePeakUpTo ? devicePeakBytes : nil),
            sizes("  RSS before bootstrap()", json.residentBytesBefore, sqlite.residentBytesBefore),
            sizes("  downloaded (GET /snapshot bodies)", json.snapshotWireBytes, sqlite.snapshotWireBytes),
            sizes("  its SQLite file once closed", json.databaseBytes, sqlite.databaseBytes),
            sizes("  its WAL once closed", json.walBytes, sqlite.walBytes),
            row("  records / requests", "\(count(json.records)) / \(json.requests)", "\(count(sqlite.records)) / \(sqlite.requests)"),
            sizes("answer, plain (Content-Length)", size.json.plainBytes, size.sqlite.plainBytes),
            sizes("answer, gzip", size.json.gzipBytes, size.sqlite.gzipBytes),
            times("server: request → headers, plain (SQLite: the first, waits for the build)",
                  size.json.plainHeadersSeconds, size.sqlite.plainHeadersSeconds, target: build),
            times("server: request → headers, gzip", size.json.gzipHeadersSeconds, size.sqlite.gzipHeadersSeconds),
            row("server: CPU of the build (user + system)", "", seconds(size.buildCPUSeconds)),
            row("server: peak RSS (VmHWM), warm, before the build", "", bytes(server.before.peakResidentBytes)),
            row("  once built (at the first SQLite answer's headers)", "", bytes(server.built.peakResidentBytes)),
            row("  the build's rise", "", "+" + bytes(size.buildPeakGrowthBytes)),
            row("  once the JSON answers were sent too", bytes(size.serverAfterAnswers.peakResidentBytes), ""),
            row("  at the end (both devices bootstrapped)", bytes(size.serverEnd.peakResidentBytes), ""),
        ] + slowReaderRows(size, row: row)
    }

    /// The slow readers' lines, on the server started afresh for them.
    private static func slowReaderRows(
        _ size: SnapshotSizeFigures, row: (String, String, String, String, String?, Bool?) -> SnapshotFigure
    ) -> [SnapshotFigure] {
        guard let slow = size.slowReaders else { return [] }
        let json = slow.json, sqlite = slow.sqlite
        func within(_ value: Int) -> Bool { (0...slowReaderBytes).contains(value) }
        return [
            row("fresh server: RSS before \(sqlite.readers) clients that stop reading", bytes(json.firstBefore), bytes(sqlite.firstBefore), "", nil, nil),
            row("  while they hold their connections", bytes(json.firstHolding), bytes(sqlite.firstHolding), "", nil, nil),
            row("  held per client (JSON: and its spool's write)", bytes(json.firstPerReader), bytes(sqlite.firstPerReader),
                ratio(Double(json.firstPerReader), Double(sqlite.firstPerReader)), "SQLite ≤ " + bytes(slowReaderBytes), within(sqlite.firstPerReader)),
            row("  again, once the first closed: RSS before", bytes(json.secondBefore), bytes(sqlite.secondBefore), "", nil, nil),
            row("  held per client (in memory the first freed)", bytes(json.secondPerReader), bytes(sqlite.secondPerReader),
                ratio(Double(json.secondPerReader), Double(sqlite.secondPerReader)), "≤ " + bytes(slowReaderBytes),
                within(json.secondPerReader) && within(sqlite.secondPerReader)),
            row("  once they closed", bytes(json.after), bytes(sqlite.after), "", nil, nil),
        ]
    }

    func table() -> String {
        let width = max(60, figures.map(\.figure.count).max() ?? 0)
        // Padded to the widest value, never cut.
        let jsonWidth = max(12, figures.map(\.json.count).max() ?? 0), sqliteWidth = max(12, figures.map(\.sqlite.count).max() ?? 0)
        let targetWidth = max(10, figures.compactMap(\.target?.count).max() ?? 0)
        var lines: [String] = []
        for size in sizes {
            lines.append("")
            lines.append(
                "Snapshot, \(Self.count(size.records)) records at revision \(size.revision) (seeded in \(Self.seconds(size.seedSeconds))): "
                    + "the JSON snapshot against the SQLite file; release server on loopback, each device in a process of its own")
            lines.append(
                [Self.cell("figure", width), Self.cell("JSON", jsonWidth), Self.cell("SQLite", sqliteWidth), Self.cell("JSON/SQLite", 11),
                 Self.cell("target", targetWidth), ""]
                    .joined(separator: " | ").replacing(/\s+$/, with: ""))
            for figure in figures where figure.records == size.records {
                let verdict = figure.met.map { $0 ? "met" : "MISSED" } ?? ""
                lines.append(
                    [Self.cell(figure.figure, width), Self.cell(figure.json, jsonWidth), Self.cell(figure.sqlite, sqliteWidth),
                     Self.cell(figure.ratio, 11), Self.cell(figure.target ?? "", targetWidth), verdict]
                        .joined(separator: " | ").replacing(/\s+$/, with: ""))
            }
        }
        lines.append("")
        let growth = sizes.map { "+\(Self.bytes($0.buildPeakGrowthBytes)) at \(Self.count($0.records))" }.joined(separator: ", ")
        switch flatBuildMemory {
        case .some(let flat):
            lines.append(
                "Server memory during the build: \(growth): \(flat ? "flat" : "NOT FLAT") "
                    + "(target: the rise at the largest size within \(Self.bytes(Self.flatSlackBytes)) of the rise at the smallest)")
        case .none:
            lines.append("Server memory during the build: \(growth) (flatness is judged with two sizes or more)")
        }
        lines.append(
            "Devices: HTTPSyncTransport with gzip, bootstrap() on a new file; the SQLite device ran once the server's file was built. "
                + "Targets: the SQLite bootstrap ≤ 5 s per million records from 100,000 on and ≤ 60 MiB peak up to 100,000; "
                + "the build ≤ 15 s per million from a million on; a client that stops reading, at most "
                + "\(Self.bytes(Self.slowReaderBytes)) of the server's memory (the project's own bound).")
        return lines.joined(separator: "\n")
    }


    private static func cell(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }

    static func seconds(_ value: Double) -> String { String(format: value < 10 ? "%.3f s" : "%.1f s", value) }

    static func bytes(_ value: Int) -> String {
        abs(value) < 1 << 20 ? String(format: "%.1f KiB", Double(value) / 1024) : String(format: "%.1f MiB", Double(value) / 1_048_576)
    }

    static func ratio(_ numerator: Double, _ denominator: Double) -> String {
        denominator > 0 ? String(format: "%.2f", numerator / denominator) : "-"
    }

    /// `100,000` style.
    static func count(_ value: Int) -> String {
        let digits = String(value)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return out
    }
}
