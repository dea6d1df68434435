import Foundation
import RevsyncDevice
import RevsyncWire
import Synchronization

/// One device's exchanges with the server, a line each, for finding out afterwards how a
/// device came to hold what it holds (`REVSYNC_SOAK_TRACE=1`: `<device file>.trace` next to
/// its SQLite file). Each line: seconds since the trace opened, what was asked, what came
/// back; change sets as `r<revision> s<seq> <entity>:<c|u|d><id>{attributes}`, rejected
/// ones marked `x`. Off by default: a ten-minute soak writes about a megabyte per device.
final class ExchangeTrace: Sendable {
    private let handle: Mutex<FileHandle?>
    private let opened = ContinuousClock.now

    /// A trace at `path` when the environment asks for one, else nil.
    static func ifEnabled(path: String) -> ExchangeTrace? {
        guard ProcessInfo.processInfo.environment["REVSYNC_SOAK_TRACE"] == "1" else { return nil }
        return ExchangeTrace(path: path)
    }

    init?(path: String) {
        // Appended to: a device's engines (restarts, restores) share one trace.
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else { return nil }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { return nil }
        handle.seekToEndOfFile()
        self.handle = Mutex(handle)
    }

    func sync(_ request: SyncRequest, _ outcome: Result<SyncResponse, any Error>) {
        var line = "sync max=\(request.maxRevision) history=\(request.history ?? "-")"
        if let wait = request.wait { line += " wait=\(wait)" }
        if !request.changeSets.isEmpty { line += " sent=[" + request.changeSets.map(Self.describe).joined(separator: "; ") + "]" }
        switch outcome {
        case .success(let response):
            line += " -> max=\(response.maxRevision) history=\(response.history ?? "-") more=\(response.more ?? false)"
            line += " [" + response.changeSets.map(Self.describe).joined(separator: "; ") + "]"
        case .failure(let error):
            line += " -> error \(error)"
        }
        write(line)
    }

    func snapshot(_ outcome: Result<SyncResponse, any Error>) {
        switch outcome {
        case .success(let response):
            write("snapshot -> max=\(response.maxRevision) history=\(response.history ?? "-") lastSeq=\(response.lastSeq.map(String.init) ?? "-")")
        case .failure(let error): write("snapshot -> error \(error)")
        }
    }

    func snapshotFile(minimum: Int64, _ outcome: Result<SnapshotFileDownload?, any Error>) {
        switch outcome {
        case .success(let download?):
            write("snapshot file min=\(minimum) -> revision=\(download.revision) lastSeq=\(download.lastSeq.map(String.init) ?? "-") digest=\(download.digest)")
        case .success(nil): write("snapshot file min=\(minimum) -> none")
        case .failure(let error): write("snapshot file min=\(minimum) -> error \(error)")
        }
    }

    func note(_ text: String) { write(text) }

    private func write(_ text: String) {
        let seconds = (ContinuousClock.now - opened) / .seconds(1)
        let line = String(format: "%.3f ", seconds) + text + "\n"
        handle.withLock { $0?.write(Data(line.utf8)) }
    }

    static func describe(_ changeSet: ChangeSet) -> String {
        var parts: [String] = []
        if let revision = changeSet.revision { parts.append("r\(revision)") }
        if let seq = changeSet.seq { parts.append("s\(seq)") }
        if changeSet.conflict == true { parts.append("x(\(changeSet.reason?.code.rawValue ?? "?"))") }
        for entity in changeSet.types {
            guard let changes = changeSet.entities[entity] else { continue }
            for (kind, ids) in [("c", changes.create), ("u", changes.update), ("d", changes.delete)] {
                for id in ids {
                    let attributes = changes.attributes[id] ?? [:]
                    let shown = attributes.keys.sorted().map { key in "\(key)=\(attributes[key].map { "\($0)" } ?? "")" }
                    parts.append("\(entity):\(kind)\(id){\(shown.joined(separator: ","))}")
                }
            }
        }
        return parts.joined(separator: " ")
    }
}
