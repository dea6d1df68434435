/// Reads a `POST /sync` answer or a JSON snapshot (`GET /snapshot`) straight from its bytes, for
/// the device: Foundation's `JSONDecoder` took about two fifths of a device's CPU loading a
/// JSON snapshot, more than storing its records in SQLite, and every catch-up is read the same
/// way.
///
/// Like `SyncRequestReader`, whose readers it shares, it answers only what it is sure of: a
/// response it returns equals what `JSONDecoder` decodes from the same bytes; for anything
/// outside the shape the server writes (a key it does not know, a key twice in one object, an
/// attribute value that is an array or an object) and anything invalid it gives nil, and the
/// caller decodes with `JSONDecoder`, which also words the error. `SyncResponseReaderTests`
/// compares the two on many bodies.
public enum SyncResponseReader {
    public static func read(_ bytes: UnsafeRawBufferPointer) -> SyncResponse? {
        var cursor = JSONCursor(bytes: bytes)
        guard let response = cursor.response(), cursor.peek() == nil else { return nil }
        return response
    }

    public static func read(_ bytes: [UInt8]) -> SyncResponse? {
        bytes.withUnsafeBytes { read($0) }
    }
}

extension JSONCursor {
    mutating func response() -> SyncResponse? {
        var maxRevision: Int64?, changeSets: [ChangeSet]?, more: Bool?, history: String?, lastSeq: Int64?
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
            case "more":
                guard seen.first(2) else { return false }
                return cursor.optional(&more) { $0.bool() }
            case "history":
                guard seen.first(3) else { return false }
                return cursor.optional(&history) { $0.string() }
            case "lastSeq":
                guard seen.first(4) else { return false }
                return cursor.optional(&lastSeq) { $0.integer() }
            default:
                return false
            }
        }
        guard read, let maxRevision, let changeSets else { return nil }
        return SyncResponse(maxRevision: maxRevision, changeSets: changeSets, more: more, history: history, lastSeq: lastSeq)
    }
}
