import NIOCore
import RevsyncGzip

/// Writes a `/sync` response around stored change set bytes without decoding them: plain
/// JSON, or one gzip member assembled from change sets compressed at commit, with the
/// response's own bytes (punctuation, acknowledgements, corrective sets) compressed between them.
struct SyncResponseWriter {
    /// The plain answer, when gzip was not asked for.
    private var plain: ByteBuffer
    /// The gzip answer, when it was.
    private var assembler: GzipAssembler?
    private var count = 0

    /// - Parameter capacity: about the size of the answer: the JSON's, or with `gzip` the bytes of
    ///   the compressed pieces and the plain ones it will hold.
    init(gzip: Bool, capacity: Int) {
        plain = ByteBufferAllocator().buffer(capacity: gzip ? 0 : capacity + 64)
        assembler = gzip ? GzipAssembler(capacity: capacity + 64) : nil
        write(ByteBuffer(string: "{\"changeSets\":["))
    }

    mutating func append(_ body: LogEntry.Body) {
        if case .inRun = body { return }
        if case .chained(let fragment) = body {
            // It holds its own separator, and refers back into the change set written before it.
            count += 1
            if assembler != nil {
                assembler?.write(fragment)
            } else {
                // A store's mistake, as below: the plain bytes so far are its dictionary.
                write((try? fragment.inflated(after: plain)) ?? ByteBuffer())
            }
            return
        }
        separate()
        switch body {
        case .plain(let bytes):
            write(bytes)
        case .inRun, .chained:
            return
        case .deflated(let fragment) where assembler != nil, .deflatedRun(let fragment) where assembler != nil:
            assembler?.write(fragment)
        case .deflated(let fragment), .deflatedRun(let fragment):
            // The change log answers in the form asked for, so this is a store's mistake; inflating it is still correct.
            var single = GzipAssembler(capacity: fragment.deflated.readableBytes)
            single.write(fragment)
            write((try? Gzip.inflate(single.finish(), maxSize: fragment.length)) ?? ByteBuffer())
        }
    }

    mutating func append(_ bytes: [UInt8]) {
        separate()
        write(ByteBuffer(bytes: bytes))
    }

    /// - Parameter history: the database's history id (a uuid: nothing in it needs escaping), if known.
    consuming func finish(maxRevision: Int64, more: Bool, history: String? = nil) -> ByteBuffer {
        var tail = "],\"maxRevision\":" + String(maxRevision) + (more ? ",\"more\":true" : "")
        if let history { tail += ",\"history\":\"" + history + "\"" }
        write(ByteBuffer(string: tail + "}"))
        // Taken out, not copied: a copy left behind would make the assembler's next write copy its whole buffer.
        guard let assembler = assembler.take() else { return plain }
        return assembler.finish()
    }

    private mutating func separate() {
        if count > 0 { write(ByteBuffer(string: ",")) }
        count += 1
    }

    private mutating func write(_ bytes: ByteBuffer) {
        if assembler != nil {
            assembler?.write(bytes)
        } else {
            var bytes = bytes
            plain.writeBuffer(&bytes)
        }
    }
}
