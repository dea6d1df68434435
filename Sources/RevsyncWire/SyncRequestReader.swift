/// Reads the usual shape of a `POST /sync` body straight from its bytes, without
/// Foundation's `JSONDecoder`, which took about 8 % of the server's CPU with 32 writers
/// (its generic containers, for a body of a couple of hundred bytes).
///
/// It answers only what it is sure of: when it returns a request, that request equals what
/// `JSONDecoder` decodes from the same bytes. Anything outside the usual shape, and anything
/// invalid, gives nil, and the caller decodes with `JSONDecoder`, which also words the error:
/// `maxRevision`, seqs, revisions and ids that are not integers within `Int64`, `wait` with an
/// exponent or that a double cannot hold (too large, or so small that it rounds to zero),
/// keys this reader does not know (unknown top-level keys, which the decoder ignores), a key
/// twice in one object, attribute values that are arrays or objects, a lone surrogate in a string. `SyncRequestReaderTests` compares the two on many bodies.
public enum SyncRequestReader {
    public static func read(_ bytes: UnsafeRawBufferPointer) -> SyncRequest? {
        var cursor = JSONCursor(bytes: bytes)
        guard let request = cursor.request(), cursor.peek() == nil else { return nil }
        return request
    }

    public static func read(_ bytes: [UInt8]) -> SyncRequest? {
        bytes.withUnsafeBytes { read($0) }
    }
}

extension JSONCursor {
    mutating func request() -> SyncRequest? {
        var maxRevision: Int64?, changeSets: [ChangeSet]?, wait: Double?, history: String?
        var seen = SeenKeys()
        let read = object { cursor, key in
            switch key {
            case "maxRevision":
                guard seen.first(0) else { return false }
                maxRevision = cursor.integer()
                return maxRevision != nil
            case "changeSets":
                guard seen.first(1) else { return false }
                changeSets = cursor.changeSets()
                return changeSets != nil
            case "wait":
                guard seen.first(2) else { return false }
                return cursor.optional(&wait) { $0.number() }
            case "history":
                guard seen.first(3) else { return false }
                return cursor.optional(&history) { $0.string() }
            default:
                return false
            }
        }
        guard read, let maxRevision, let changeSets else { return nil }
        return SyncRequest(maxRevision: maxRevision, changeSets: changeSets, wait: wait, history: history)
    }
}
