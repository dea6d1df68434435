import NIOCore

/// Encodes commands as RESP multi-bulk requests (`*<n>\r\n$<len>\r\n<bytes>\r\n…`).
///
/// Arguments stay binary-safe, and a pipeline goes out as one buffer in one write.
enum RESPCommandEncoder {
    /// Appends one command to `buffer`.
    static func encode(_ arguments: [ByteBuffer], into buffer: inout ByteBuffer) throws(RedisError) {
        guard !arguments.isEmpty else { throw .protocolError("a command needs at least its name") }
        buffer.writeStaticString("*")
        buffer.writeString(String(arguments.count))
        buffer.writeStaticString("\r\n")
        for argument in arguments {
            buffer.writeStaticString("$")
            buffer.writeString(String(argument.readableBytes))
            buffer.writeStaticString("\r\n")
            buffer.writeImmutableBuffer(argument)
            buffer.writeStaticString("\r\n")
        }
    }

    /// Encodes commands back to back, ready to be sent as one pipeline.
    static func encode(_ commands: [[ByteBuffer]]) throws(RedisError) -> ByteBuffer {
        let payload = commands.reduce(0) { total, command in
            command.reduce(total + 16) { $0 + $1.readableBytes + 16 }
        }
        var buffer = ByteBufferAllocator().buffer(capacity: payload)
        for command in commands {
            try encode(command, into: &buffer)
        }
        return buffer
    }
}
