import NIOCore
import Testing
@testable import RevsyncServer

/// The waits' deadlines heap, alone.
@Suite struct WaitDeadlinesTests {
    static let origin = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func at(_ milliseconds: Int64) -> NIODeadline { origin + .milliseconds(milliseconds) }

    @Test func dueEntriesComeOutEarliestFirstAndTheRestStay() {
        var deadlines = WaitDeadlines()
        var generator = SystemRandomNumberGenerator()
        let offsets = (0..<200).map { _ in Int64.random(in: 0..<1_000, using: &generator) }
        for (id, offset) in offsets.enumerated() { deadlines.insert(.init(at: Self.at(offset), id: id)) }
        let due = deadlines.popDue(at: Self.at(499))
        #expect(due.map(\.at) == offsets.filter { $0 <= 499 }.sorted().map(Self.at))
        #expect(deadlines.count == offsets.count { $0 > 499 })
        #expect(deadlines.earliest == offsets.filter { $0 > 499 }.min().map(Self.at))
        let rest = deadlines.popDue(at: Self.at(999))
        #expect(rest.map(\.at) == offsets.filter { $0 > 499 }.sorted().map(Self.at))
        #expect(deadlines.count == 0)
    }

    @Test func nothingIsDueBeforeItsDeadline() {
        var deadlines = WaitDeadlines()
        deadlines.insert(.init(at: Self.at(10), id: 1))
        #expect(deadlines.popDue(at: Self.at(9)).isEmpty)
        #expect(deadlines.popDue(at: Self.at(10)).map(\.id) == [1])
        #expect(deadlines.earliest == nil)
    }

    @Test func staleEntriesAtTheTopAreDroppedAndRebuildKeepsOnlyLiveOnes() {
        var deadlines = WaitDeadlines()
        for id in 0..<10 { deadlines.insert(.init(at: Self.at(Int64(id)), id: id)) }
        let live: Set<Int> = [3, 7, 8]
        deadlines.dropStale { live.contains($0) }
        #expect(deadlines.earliest == Self.at(3))
        #expect(deadlines.count == 7)
        deadlines.rebuild { live.contains($0) }
        #expect(deadlines.count == 3)
        #expect(deadlines.popDue(at: Self.at(100)).map(\.id) == [3, 7, 8])
    }
}
