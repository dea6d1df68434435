import Foundation
import NIOCore
import NIOHTTP1
import RevsyncGzip
import RevsyncLink
import RevsyncWire
import Testing

@testable import RevsyncSim

/// A request that reached two instances at once must be answered alike by both.
@Suite struct SplitAuditTests {
    static let request = #"{"maxRevision":3,"changeSets":[{"seq":4,"types":["notes"],"notes":{"create":[-4],"attributes":{"-4":{"body":"x"}}}}]}"#
    static let committed = #"{"maxRevision":9,"changeSets":[{"revision":8,"types":["teams"],"teams":{"create":[2],"attributes":{"2":{"name":"Owls"}}}},{"seq":4,"revision":9,"types":["notes"],"notes":{"create":[40],"attributes":{"40":{"__oldId__":-4,"body":"x"}}}}]}"#
    static let replayed = #"{"maxRevision":9,"changeSets":[{"seq":4,"revision":9,"types":["notes"],"notes":{"create":[40],"attributes":{"40":{"__oldId__":-4,"body":"x"}}}}]}"#
    static let refused = #"{"maxRevision":9,"changeSets":[{"seq":4,"conflict":true,"reason":{"code":"invalid","message":"seq 4 was used for other content"},"types":["notes"],"notes":{"create":[],"update":[],"delete":[]}}]}"#

    static func exchange(request: String = request, _ first: (Int, String), _ second: (Int, String), gzipSecond: Bool = false) -> SplitExchange {
        var zipped = HTTPHeaders()
        zipped.add(name: "Content-Encoding", value: "gzip")
        let secondBody = gzipSecond ? Gzip.deflate(ByteBuffer(string: second.1)) : ByteBuffer(string: second.1)
        return SplitExchange(
            requestHeaders: HTTPHeaders(), requestBody: ByteBuffer(string: request),
            answers: [
                .init(status: first.0, headers: HTTPHeaders(), body: ByteBuffer(string: first.1)),
                .init(status: second.0, headers: gzipSecond ? zipped : HTTPHeaders(), body: secondBody),
            ])
    }

    @Test func theSameRevisionInBothAnswersAgreesWhateverElseTheyCatchUp() {
        #expect(SplitAudit.compare(Self.exchange((200, Self.committed), (200, Self.replayed))) == .agreed)
        #expect(SplitAudit.compare(Self.exchange((200, Self.replayed), (200, Self.committed), gzipSecond: true)) == .agreed)
    }

    @Test func aRefusalBesideACommitDisagrees() {
        let comparison = SplitAudit.compare(Self.exchange((200, Self.committed), (200, Self.refused)))
        #expect(comparison == .disagreed("seq 4: committed as 9 then refused (invalid)"))
    }

    @Test func aSeqRefusedByOneInstanceAndAnsweredByTheOtherDisagrees() {
        let reused = #"{"error":"seq_reused","message":"seq 4 was used for other content","seq":4,"expected":4}"#
        #expect(SplitAudit.compare(Self.exchange((409, reused), (200, Self.committed))) == .disagreed("seqs 4: answered 200 and 409 seq_reused"))
    }

    @Test func errorsAndRequestsWithoutSeqsAreNotCompared() {
        #expect(SplitAudit.compare(Self.exchange((200, Self.committed), (503, "{}"))) == .notCompared)
        #expect(SplitAudit.compare(Self.exchange((401, "{}"), (409, "{}"))) == .notCompared)
        #expect(SplitAudit.compare(Self.exchange(request: #"{"maxRevision":3,"changeSets":[]}"#, (200, Self.committed), (200, Self.refused))) == .notCompared)
    }

    @Test func theCheckFailsOnADisagreementAndSaysWhenNothingWasSplit() {
        let audit = SplitAudit()
        #expect(VerdictChecks.splitRequests(audit.tally).passed)
        #expect(VerdictChecks.splitRequests(audit.tally).detail.contains("no request split"))
        audit.record(Self.exchange((200, Self.committed), (200, Self.replayed)))
        audit.record(Self.exchange((200, Self.committed), (503, "{}")))
        let passing = VerdictChecks.splitRequests(audit.tally)
        #expect(passing.passed)
        #expect(passing.detail.hasPrefix("1 of 1 split requests with change sets answered alike by both instances, 1 not compared"))
        audit.record(Self.exchange((200, Self.replayed), (200, Self.refused)))
        let failing = VerdictChecks.splitRequests(audit.tally)
        #expect(!failing.passed)
        #expect(failing.detail.contains("seq 4: committed as 9 then refused (invalid)"))
    }
}
