import Foundation
import NIOCore
import RevsyncGzip

/// The JSON snapshot, written to a scratch file before it is sent: PostgreSQL is read
/// at its own pace and its connection goes back to the pool at once, however slowly
/// the client then downloads (streaming straight from the cursor held a pooled
/// connection for as long as the client took, and twenty slow clients starved `/sync`).
///
/// At most `readers` snapshots are read at once (each holds a connection while it reads);
/// more requests wait their turn without one, so that a burst of new devices cannot take
/// every pooled connection from `/sync`.
struct SnapshotSpool: Sendable {
    let streamer: SnapshotStreamer
    /// The instance's work directory (shared with the snapshot file's builds).
    let work: SnapshotWorkDirectory
    let readers: ConcurrencyGate

    /// Writes the snapshot (gzip-compressed, or not); the file is removed when the value
    /// returned goes. `device`: the requesting device's id (`SnapshotStreamer`).
    func write(gzip: Bool, device: Int64? = nil) async throws -> SpooledSnapshot {
        let spool = self
        let (path, size) = try await readers.run { try await spool.written(gzip: gzip, device: device) }
        return SpooledSnapshot(path: path, size: size)
    }

    private func written(gzip: Bool, device: Int64?) async throws -> (path: String, size: Int) {
        let path = try work.path() + "/snapshot-\(UUID().uuidString.lowercased())" + (gzip ? ".json.gz" : ".json")
        guard FileManager.default.createFile(atPath: path, contents: nil), let output = FileHandle(forWritingAtPath: path) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
        var size = 0
        do {
            defer { try? output.close() }
            func emit(_ buffer: ByteBuffer) throws {
                size += buffer.readableBytes
                try output.write(contentsOf: Data(buffer.readableBytesView))
            }
            if gzip {
                let stream = try GzipStream()
                try await streamer.stream(for: device) { chunk in
                    for part in try stream.compress(chunk) { try emit(part) }
                }
                for part in try stream.finish() { try emit(part) }
            } else {
                try await streamer.stream(for: device) { chunk in try emit(chunk) }
            }
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            throw error
        }
        return (path, size)
    }
}
