import Foundation
import Testing
@testable import RevsyncSim

@Suite struct SoakReportCodingTests {
    @Test func verdictPassesOnlyWhenEveryCheckHolds() {
        let ok = VerdictSummary(checks: [.init(name: "a", passed: true, detail: "")])
        let bad = VerdictSummary(checks: [.init(name: "a", passed: true, detail: ""), .init(name: "b", passed: false, detail: "x")])
        #expect(ok.passed)
        #expect(!bad.passed)
        #expect(bad.violations.map(\.name) == ["b"])
    }
}
