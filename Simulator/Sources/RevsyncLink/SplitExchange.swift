import NIOCore
import NIOHTTP1

/// A request the link sent to two servers at once (``RequestFate/split``), with both
/// answers in the order they came; the device got the last one. Both went to the same
/// dataset, so for a device's change sets they must say the same thing.
public struct SplitExchange: Sendable {
    public var requestHeaders: HTTPHeaders
    public var requestBody: ByteBuffer
    public var answers: [Answer]

    /// One server's whole answer.
    public struct Answer: Sendable {
        public var status: Int
        public var headers: HTTPHeaders
        public var body: ByteBuffer

        public init(status: Int, headers: HTTPHeaders, body: ByteBuffer) {
            self.status = status
            self.headers = headers
            self.body = body
        }
    }

    public init(requestHeaders: HTTPHeaders, requestBody: ByteBuffer, answers: [Answer]) {
        self.requestHeaders = requestHeaders
        self.requestBody = requestBody
        self.answers = answers
    }
}
