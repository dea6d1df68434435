import RevsyncRules
import Testing

/// Which change sets of a batch wait for the next one.
@Suite struct BatchFootprintTests {
    let team = RecordKey("teams", 1), player = RecordKey("players", 2), note = RecordKey("notes", 3)

    @Test func readsOfOneRecordGoTogetherButAWriteAfterAReadOrAWriteWaits() {
        var footprint = BatchFootprint()
        footprint.add(device: 1, seq: 1, created: [], reads: [team], writes: [player])
        #expect(footprint.blocks(reads: [team], writes: [note]) == false, "two readers of one parent")
        #expect(footprint.blocks(reads: [player], writes: []), "reading what an earlier one wrote")
        #expect(footprint.blocks(reads: [], writes: [team]), "writing what an earlier one read")
        #expect(footprint.blocks(reads: [], writes: [player]), "writing what an earlier one wrote")
        #expect(footprint.blocks(reads: [], writes: [note]) == false)
    }

    @Test func temporaryIdsAndSeqsAreTheirDevicesOwn() {
        var footprint = BatchFootprint()
        footprint.add(device: 1, seq: 4, created: [-7], reads: [], writes: [])
        #expect(footprint.blocks(device: 1, temporaryIds: [-7, -8]))
        #expect(footprint.blocks(device: 2, temporaryIds: [-7]) == false, "another device's -7 is another record")
        #expect(footprint.handled(device: 1, seq: 4))
        #expect(footprint.handled(device: 1, seq: 5) == false)
        #expect(footprint.handled(device: 2, seq: 4) == false)
    }
}
