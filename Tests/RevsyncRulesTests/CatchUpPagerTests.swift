import RevsyncRules
import Testing

@Suite struct CatchUpPagerTests {
    @Test func aSingleHugeEntryIsAdmittedAloneAndEndsThePage() {
        var pager = CatchUpPager(limits: CatchUpLimits(maxChangeSets: 10, maxBytes: 100))
        let first = pager.admit(size: 500), second = pager.admit(size: 1)
        #expect(first)
        #expect(!second)
        #expect(pager.full)
    }

    @Test func aRunIsAdmittedWholeOnlyWhenEachOfItsEntriesWouldBe() {
        // Whatever the single sizes inside a run of `size` total, taking it whole must leave the
        // pager where taking its entries one by one would.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let limits = CatchUpLimits(maxChangeSets: Int.random(in: 1...40, using: &generator), maxBytes: Int.random(in: 1...400, using: &generator))
            var whole = CatchUpPager(limits: limits), single = CatchUpPager(limits: limits)
            for _ in 0..<Int.random(in: 0...5, using: &generator) {
                let size = Int.random(in: 0...60, using: &generator)
                _ = whole.admit(size: size)
                _ = single.admit(size: size)
            }
            let sizes = (0..<Int.random(in: 1...8, using: &generator)).map { _ in Int.random(in: 0...60, using: &generator) }
            let admitted = whole.admitRun(count: sizes.count, size: sizes.reduce(0, +))
            if admitted {
                var each = true
                for size in sizes where !single.admit(size: size) { each = false }
                #expect(each)
                #expect(whole.count == single.count && whole.bytes == single.bytes && !single.full)
            } else {
                #expect(!whole.full || single.full, "a refused run ends nothing by itself")
            }
        }
    }
}
