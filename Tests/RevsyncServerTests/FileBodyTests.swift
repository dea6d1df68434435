import Foundation
import Hummingbird
import NIOCore
import Synchronization
import Testing

@testable import RevsyncServer

/// A snapshot's bytes sent from its file: whole or a range, in chunks, and read no further
/// ahead than the connection has taken.
@Suite("File bodies")
struct FileBodyTests {
    /// Four chunks and a little more, each byte its offset modulo 251.
    static let size = 4 * FileBody.chunkLength + 3

    @Test func theWholeFileAndAnyRangeAreSentInChunks() async throws {
        let file = try TemporaryFile(size: Self.size)
        defer { file.remove() }
        let whole = try await Self.collect(try await FileBody.load(path: file.path))
        #expect(whole.bytes == file.bytes)
        #expect(whole.chunks.allSatisfy { $0 <= FileBody.chunkLength })
        #expect(whole.chunks.count == 5)

        // Across two chunk boundaries, and the last bytes alone.
        let range = (FileBody.chunkLength - 7)...(2 * FileBody.chunkLength + 9)
        let part = try await Self.collect(try await FileBody.load(path: file.path, range: range))
        #expect(part.bytes == Array(file.bytes[range]))
        let tail = try await Self.collect(try await FileBody.load(path: file.path, range: (Self.size - 3)...(Self.size - 1)))
        #expect(tail.bytes == Array(file.bytes.suffix(3)))
    }

    @Test func aMissingFileIsSaidBeforeTheAnswerAndAnEmptyOneSendsNothing() async throws {
        let file = try TemporaryFile(size: 0)
        defer { file.remove() }
        #expect(try await Self.collect(try await FileBody.load(path: file.path)).bytes.isEmpty)
        await #expect(throws: FileBody.Missing.self) { _ = try await FileBody.load(path: file.path + ".gone") }
        await #expect(throws: FileBody.Shortened.self, "a range past the file is said before the answer") {
            _ = try await FileBody.load(path: file.path, range: 0...0)
        }
    }

    /// The body reads a chunk only once the writer has taken the one before: a file cut short
    /// while the first chunk waits is seen when the next is read (a body that read ahead would
    /// have sent bytes the file no longer has), and ends the answer with an error.
    @Test func nothingIsReadAheadOfTheConnection() async throws {
        let file = try TemporaryFile(size: Self.size)
        defer { file.remove() }
        let body = try await FileBody.load(path: file.path)
        let firstWrite = AsyncStream.makeStream(of: Void.self)
        let resume = AsyncStream.makeStream(of: Void.self)
        let collected = Collected()
        let writer = CollectingWriter(collected: collected) { count in
            guard count == 1 else { return }
            firstWrite.continuation.yield()
            for await _ in resume.stream { break }
        }
        let sent = Task { try await body.write(writer) }
        for await _ in firstWrite.stream { break }
        // Long after a read-ahead would have read the rest of the file.
        try await Task.sleep(for: .milliseconds(200))
        // In place: the body's open handle sees it.
        #expect(truncate(file.path, off_t(FileBody.chunkLength)) == 0)
        resume.continuation.yield()
        await #expect(throws: FileBody.Shortened.self) { try await sent.value }
        #expect(collected.chunks.withLock { $0 } == [FileBody.chunkLength], "only the chunk read before the file was cut")
    }

    static func collect(_ body: ResponseBody) async throws -> (bytes: [UInt8], chunks: [Int]) {
        let collected = Collected()
        try await body.write(CollectingWriter(collected: collected) { _ in })
        #expect(collected.finished.withLock { $0 })
        return (collected.bytes.withLock { $0 }, collected.chunks.withLock { $0 })
    }
}

private final class Collected: Sendable {
    let bytes = Mutex<[UInt8]>([])
    let chunks = Mutex<[Int]>([])
    let finished = Mutex(false)
}

private struct CollectingWriter: ResponseBodyWriter {
    let collected: Collected
    /// Runs after each chunk is kept, with the number of chunks so far; the write returns when it does.
    let afterWrite: @Sendable (Int) async -> Void

    mutating func write(_ buffer: ByteBuffer) async throws {
        collected.bytes.withLock { $0 += buffer.readableBytesView }
        let count = collected.chunks.withLock { chunks in
            chunks.append(buffer.readableBytes)
            return chunks.count
        }
        await afterWrite(count)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        collected.finished.withLock { $0 = true }
    }
}

/// A file of `size` patterned bytes in the temporary directory.
private struct TemporaryFile {
    let path: String
    let bytes: [UInt8]

    init(size: Int) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("revsync-file-body-\(UUID().uuidString)").path
        bytes = (0..<size).map { UInt8($0 % 251) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}
