import Foundation

/// What a `Range` header asks of a body of `size` bytes (RFC 9110, 14.1.2 and 14.2),
/// for the one case a resuming download needs: a single range of bytes.
enum ByteRange: Sendable, Hashable {
    /// No range, one the server does not serve (several, or another unit), or a malformed
    /// one: the whole body, `200`.
    case whole
    /// `206` with these bytes (inclusive).
    case part(ClosedRange<Int>)
    /// `416`: the range starts at or past the end.
    case unsatisfiable

    static func parse(_ header: String?, size: Int) -> ByteRange {
        guard let header else { return .whole }
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { return .whole }
        let spec = text.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash], last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            // The last N bytes.
            guard let suffix = Int(last), suffix >= 0 else { return .whole }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .part(max(0, size - suffix)...(size - 1))
        }
        guard let start = Int(first), start >= 0 else { return .whole }
        guard start < size else { return .unsatisfiable }
        if last.isEmpty { return .part(start...(size - 1)) }
        guard let end = Int(last), end >= start else { return .whole }
        return .part(start...min(end, size - 1))
    }
}
