import NIOCore

/// Writes a `/sync` response around stored change set bytes without decoding them.
struct SyncResponseWriter {
    private(set) var buffer: ByteBuffer
    private var count = 0

    init(capacity: Int) {
        buffer = ByteBufferAllocator().buffer(capacity: capacity + 64)
        buffer.writeStaticString("{\"changeSets\":[")
    }

    mutating func append(_ bytes: ByteBuffer) {
        if count > 0 { buffer.writeStaticString(",") }
        var copy = bytes
        buffer.writeBuffer(&copy)
        count += 1
    }

    mutating func append(_ bytes: [UInt8]) {
        if count > 0 { buffer.writeStaticString(",") }
        buffer.writeBytes(bytes)
        count += 1
    }

    consuming func finish(maxRevision: Int64, more: Bool) -> ByteBuffer {
        buffer.writeStaticString("],\"maxRevision\":")
        buffer.writeString(String(maxRevision))
        if more { buffer.writeStaticString(",\"more\":true") }
        buffer.writeStaticString("}")
        return buffer
    }
}
