import Foundation
import RevsyncGzip

extension Gzip {
    /// Whether an `Accept-Encoding` value allows gzip (`gzip`, `x-gzip` or `*`, not with q=0).
    static func accepted(_ header: String?) -> Bool {
        guard let header else { return false }
        for part in header.split(separator: ",") {
            let fields = part.split(separator: ";").map { $0.trimmingHTTPWhitespace.lowercased() }
            guard let coding = fields.first, ["gzip", "x-gzip", "*"].contains(coding) else { continue }
            let quality = fields.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            let refused = quality <= 0
            if !refused { return true }
        }
        return false
    }
}
