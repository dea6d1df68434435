import Foundation
import NIOCore
import NIOHTTP1
import RevsyncGzip
import RevsyncLink
import RevsyncWire
import Synchronization

/// Requests the links sent to two server instances at once (`RequestFate.split`): both
/// instances serve one dataset, so for each change set of the request both answers must
/// say the same, one as its first outcome, the other as the same outcome repeated. A
/// device whose requests reach two instances together is served the way it would be by one.
public final class SplitAudit: Sendable {
    /// What one split request's two answers said about its change sets.
    public enum Comparison: Sendable, Equatable {
        case agreed
        case disagreed(String)
        /// Not both answered 200 (or 200 and 409), or no change set with a seq to compare.
        case notCompared
    }

    /// What the audit saw: split requests, those whose answers agreed, and the disagreements.
    public struct Tally: Sendable, Equatable {
        public var splits = 0
        public var agreed = 0
        public var disagreements: [String] = []

        public init(splits: Int = 0, agreed: Int = 0, disagreements: [String] = []) {
            self.splits = splits
            self.agreed = agreed
            self.disagreements = disagreements
        }
    }

    private let counts = Mutex(Tally())

    public init() {}

    public func record(_ exchange: SplitExchange) {
        let comparison = Self.compare(exchange)
        counts.withLock { tally in
            tally.splits += 1
            switch comparison {
            case .agreed: tally.agreed += 1
            case .disagreed(let detail): tally.disagreements.append(detail)
            case .notCompared: break
            }
        }
    }

    public var tally: Tally { counts.withLock { $0 } }

    /// Compares what the two answers said about each of the request's seqs.
    public static func compare(_ exchange: SplitExchange) -> Comparison {
        guard exchange.answers.count == 2, let request: SyncRequest = decode(exchange.requestBody, headers: exchange.requestHeaders)
        else { return .notCompared }
        let seqs = request.changeSets.compactMap(\.seq)
        guard !seqs.isEmpty else { return .notCompared }
        let statuses = exchange.answers.map(\.status)
        // A 409 refuses the seqs themselves (a gap, or a seq reused for other content): the
        // same request cannot deserve that from one instance and an answer from the other.
        if Set(statuses) == [200, 409], let refusal = exchange.answers.first(where: { $0.status == 409 }) {
            let error: ErrorBody? = decode(refusal.body, headers: refusal.headers)
            return .disagreed("seqs \(seqs.map(String.init).joined(separator: ", ")): answered 200 and 409 \(error?.error ?? "")")
        }
        // Other statuses (an instance killed or restarting, a revocation reaching one
        // instance first) say nothing about the seqs.
        guard statuses == [200, 200] else { return .notCompared }
        let said = exchange.answers.map { answer -> [Int64: String]? in
            let response: SyncResponse? = decode(answer.body, headers: answer.headers)
            return response.map { outcomes($0, seqs: seqs) }
        }
        guard let first = said[0], let second = said[1] else { return .disagreed("an answer was not a sync response") }
        guard first != second else { return .agreed }
        let differing = seqs.filter { first[$0] != second[$0] }.map { "seq \($0): \(first[$0] ?? "nothing") then \(second[$0] ?? "nothing")" }
        return .disagreed(differing.joined(separator: ", "))
    }

    /// Each seq's outcome in `response`: the revision it committed as, or the code of its refusal.
    static func outcomes(_ response: SyncResponse, seqs: [Int64]) -> [Int64: String] {
        var said: [Int64: String] = [:]
        for changeSet in response.changeSets {
            guard let seq = changeSet.seq, seqs.contains(seq) else { continue }
            said[seq] = changeSet.conflict == true
                ? "refused (\(changeSet.reason?.code.rawValue ?? "no reason"))"
                : "committed as \(changeSet.revision.map(String.init) ?? "?")"
        }
        return said
    }

    private static func decode<T: Decodable>(_ body: ByteBuffer, headers: HTTPHeaders) -> T? {
        var bytes = body
        if headers["Content-Encoding"].contains(where: { $0.lowercased() == "gzip" }) {
            guard let inflated = try? Gzip.inflate(body, maxSize: 256 << 20) else { return nil }
            bytes = inflated
        }
        return try? JSONDecoder().decode(T.self, from: Data(bytes.readableBytesView))
    }
}
