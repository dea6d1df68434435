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
            // The strings of one array (a catch-up's change sets) go into one buffer and are handed
            // on as slices of it: one allocation for the reply, not one per element.
            var total = 0
            for index in 0..<node.elements where node.element?[index]?.pointee.type == REDIS_REPLY_STRING {
                total += node.element?[index]?.pointee.len ?? 0
            }
            var shared = ByteBufferAllocator().buffer(capacity: total)
            var spans: [(index: Int, start: Int, length: Int)] = []
            for index in 0..<node.elements {
                guard let child = node.element?[index] else {
                    throw .protocolError("hiredis returned an array reply with a missing element")
                }
                let element = child.pointee
                if element.type == REDIS_REPLY_STRING {
                    spans.append((elements.count, shared.writerIndex, element.len))
                    shared.writeBytes(UnsafeRawBufferPointer(start: element.str, count: element.str == nil ? 0 : element.len))
                    elements.append(.null)
                } else {
                    elements.append(try RedisValue(copying: child))
                }
            }
            // Sliced only once every string is in: a slice taken earlier would make the next write copy the whole buffer.
            for span in spans { elements[span.index] = .bulk(shared.getSlice(at: span.start, length: span.length) ?? ByteBuffer()) }
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
