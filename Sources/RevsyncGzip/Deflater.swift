import CZlib

/// A zlib compressor kept from one fragment to the next.
///
/// Setting zlib up allocates and clears about 256 KiB; on this project's machine that took
/// about 60 µs a fragment, fifteen times what compressing a change set of a few hundred
/// bytes takes once the compressor is set up (reset, about 4 µs). A batch's commit makes
/// three fragments a change set, so it compresses them all with one `Deflater`.
///
/// One owner at a time: it is not `Sendable`, and lives as long as the work that made it.
public final class Deflater {
    private let stream: UnsafeMutablePointer<z_stream>
    private let ready: Bool
    private var level: Int32

    public init(level: Int32 = DeflateFragment.commitLevel) {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        // windowBits -15: raw deflate with the full 32 KiB window every gzip reader accepts.
        ready = CZlib_deflateInit2(stream, level, -15, Self.memoryLevel) == Z_OK
        self.level = level
    }

    /// zlib's `memLevel`, its default.
    static let memoryLevel: Int32 = 8

    /// Input shorter than this is one block, whatever zlib decides about it: a compressing
    /// level ends a block early only when its buffer of symbols fills, which holds
    /// `1 << (memLevel + 6)` minus one, and every input byte makes at most one symbol (zlib's
    /// `deflate_slow` and `deflate_fast`, and `_tr_tally`'s `sym_end`). A `Z_BLOCK` flush then ends
    /// that one block. `StoredBlockTests` compares this with walking the blocks.
    static let singleBlockInput = (1 << (Int(memoryLevel) + 6)) - 1

    /// Whether the zlib linked is one whose blocks `singleBlockInput` describes: zlib's own 1.2
    /// and 1.3 lines. Others that take its name end blocks by rules of their own (zlib-ng's
    /// compatibility build reports "…zlib-ng"; s390x builds may deflate in hardware), and their
    /// fragments are walked.
    static let endsBlocksAsZlib: Bool = {
        #if arch(s390x)
            return false
        #else
            let version = String(cString: zlibVersion())
            return (version.hasPrefix("1.2.") || version.hasPrefix("1.3.")) && !version.lowercased().contains("ng")
        #endif
    }()

    deinit {
        if ready { deflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// The stream, reset and at `level`, for one fragment; nil when zlib could not be set up.
    /// zlib keeps the stream's address inside its state, so it is never moved or copied.
    func reset(level: Int32) -> UnsafeMutablePointer<z_stream>? {
        guard ready, deflateReset(stream) == Z_OK else { return nil }
        if level != self.level {
            // Straight after a reset nothing is pending, so changing the level flushes nothing.
            guard deflateParams(stream, level, Z_DEFAULT_STRATEGY) == Z_OK else { return nil }
            self.level = level
        }
        return stream
    }
}
