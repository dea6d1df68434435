import CHiredis
import NIOCore

extension RedisValue {
    /// Copies a hiredis reply tree into Swift values.
    ///
    /// Everything is copied out because the caller frees the tree with
    /// `freeReplyObject` as soon as this returns.
    init(copying reply: UnsafePointer<redisReply>) throws(RedisError) {
        let node = reply.pointee
        switch node.type {
        case REDIS_REPLY_STRING:
            var buffer = ByteBufferAllocator().buffer(capacity: node.len)
            buffer.writeBytes(UnsafeRawBufferPointer(start: node.str, count: node.str == nil ? 0 : node.len))
            self = .bulk(buffer)
        case REDIS_REPLY_STATUS:
            self = .status(Self.text(node))
        case REDIS_REPLY_ERROR:
            self = .error(Self.text(node))
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(node.integer))
        case REDIS_REPLY_NIL:
            self = .null
        case REDIS_REPLY_ARRAY:
            var elements: [RedisValue] = []
            elements.reserveCapacity(node.elements)
            for index in 0..<node.elements {
                guard let child = node.element?[index] else {
                    throw .protocolError("hiredis returned an array reply with a missing element")
                }
                elements.append(try RedisValue(copying: child))
            }
            self = .array(elements)
        default:
            throw .protocolError("hiredis returned an unknown reply type \(node.type)")
        }
    }

    private static func text(_ node: redisReply) -> String {
        guard let characters = node.str else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: characters, count: node.len), as: UTF8.self)
    }
}
