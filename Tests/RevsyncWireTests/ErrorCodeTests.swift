import Foundation
import Testing

@testable import RevsyncWire

@Suite struct ErrorCodeTests {
    /// The envelope error table of PROTOCOL.md.
    @Test(arguments: [
        ("invalid_json", 400), ("invalid_request", 400),
        ("unauthorized", 401),
        ("sequence_gap", 409), ("revision_ahead", 409),
        ("snapshot_required", 410),
        ("too_large", 413),
        ("unsupported_encoding", 415),
        ("unavailable", 503),
    ])
    func contractCodeHasItsStatus(code: String, status: Int) throws {
        let errorCode = try #require(ErrorCode(rawValue: code), "no ErrorCode for contract code \(code)")
        #expect(errorCode.status == status)
    }

    @Test func everyCodeMapsToAnErrorStatus() {
        for code in ErrorCode.allCases {
            #expect((400..<600).contains(code.status), "\(code) has status \(code.status)")
        }
    }

    @Test func sequenceGapBodyCarriesTheExpectedSeq() throws {
        let body = ErrorBody(error: ErrorCode.sequenceGap.rawValue, message: "expected seq 4", expected: 4)
        let object = try #require(
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(body)) as? [String: Any])
        #expect(object["error"] as? String == "sequence_gap")
        #expect(object["expected"] as? Int == 4)
    }
}
