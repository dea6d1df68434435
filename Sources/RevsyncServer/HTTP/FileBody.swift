import Hummingbird
import NIOCore
import _NIOFileSystem

/// A file's bytes, or a range of them, as a response body read one chunk at a time: the next
/// chunk is read from disk only once the connection has taken the one before.
///
/// Hummingbird's `FileIO.loadFile` reads through NIO's `FileChunks`, which keeps up to eight
/// chunks of 128 KiB read ahead of the connection, and its writer does not wait for the
/// connection to take them: a client that stopped reading a snapshot held 1.4–2.8 MB of the
/// server's memory, so many slow clients could hold gigabytes (docs/performance.md, "Snapshot
/// readers that stop reading, bounded"). Here such a client holds the chunk its writer waits
/// to hand over and what the channel's write buffer took before it stopped being writable:
/// about 0.2 MB.
enum FileBody {
    /// Small enough to stay below glibc's threshold for mapping an allocation of its own
    /// (128 KiB), so that a chunk's memory is reused rather than mapped and unmapped each time;
    /// large enough that a download's reads cost little next to its writes.
    static let chunkLength = 64 * 1024

    /// The body of the whole file, or of `range` of its bytes; its length is checked now, its
    /// bytes read as they are sent.
    /// - Parameter channel: the connection's: each chunk waits until the one before has reached
    ///   it (see below). Nil in tests without one.
    /// - Throws: `FileBody.Missing` when there is no file at `path`, `FileBody.Shortened` when
    ///   `range` ends past it.
    static func load(
        path: String, range: ClosedRange<Int>? = nil, channel: (any Channel)? = nil
    ) async throws -> ResponseBody {
        guard let info = try await FileSystem.shared.info(forFileAt: FilePath(path)) else { throw Missing(path: path) }
        let size = Int(info.size)
        // A range is of the size the caller was told (a catalog's record of the file): a file
        // now shorter is said before the answer's head, not by a connection cut after it.
        if let range, range.upperBound >= size { throw Shortened(path: path, at: Int64(size)) }
        guard size > 0 else { return ResponseBody() }
        let bytes = range ?? 0...(size - 1)
        return ResponseBody(contentLength: bytes.count) { writer in
            try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(path)) { handle in
                var offset = Int64(bytes.lowerBound)
                let end = Int64(bytes.upperBound) + 1
                while offset < end {
                    let length = min(Int64(chunkLength), end - offset)
                    let chunk = try await handle.readChunk(fromAbsoluteOffset: offset, length: .bytes(length))
                    // The answer's length was promised in its head: a file cut short under it
                    // ends the connection rather than the answer.
                    guard chunk.readableBytes > 0 else { throw Shortened(path: path, at: offset) }
                    offset += Int64(chunk.readableBytes)
                    try await writer.write(chunk)
                    // The writer hands a chunk to the channel's event loop and returns without
                    // waiting for it to get there; it waits only once the channel has said it is
                    // not writable. With the loop busy, tens of chunks passed it before it could
                    // say so (a client that stopped reading then held 2.3 MB instead of 0.4).
                    // A task on the loop runs after the writes queued before it: past it, the
                    // writer knows, and the next write waits.
                    // (A closed channel's loop may be gone: its next write throws instead.)
                    if let channel, channel.isActive { try await channel.eventLoop.submit {}.get() }
                }
            }
            try await writer.finish(nil)
        }
    }

    /// No file at the path the body was asked for.
    struct Missing: Error, CustomStringConvertible {
        let path: String
        var description: String { "no file at \(path)" }
    }

    /// The file ended before the bytes its body promised.
    struct Shortened: Error, CustomStringConvertible {
        let path: String
        let at: Int64
        var description: String { "\(path) ended at byte \(at), before the bytes its answer promised" }
    }
}
