import Foundation
import RevsyncTestSupport
import Testing
@testable import RevsyncSim

/// The soak's rolling schema upgrade: the schema it writes, and the check on what followed.
@Suite struct SchemaUpgradeTests {
    @Test func theUpgradedSchemaHasTheNewNullableAttributeAtTheNextVersion() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("upgrade-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let original = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: defaultSchemaPath))) as? [String: Any])
        let (path, version) = try SchemaUpgrade.write(from: defaultSchemaPath, into: directory)
        #expect(version == (original["version"] as? Int ?? 0) + 1)
        let upgraded = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        let notes = (upgraded["entities"] as? [[String: Any]])?.first { $0["name"] as? String == "notes" }
        let mood = (notes?["attributes"] as? [[String: Any]])?.first { $0["name"] as? String == "mood" }
        #expect(mood?["nullable"] as? Bool == true && mood?["type"] as? String == "string")
        #expect((upgraded["entities"] as? [Any])?.count == (original["entities"] as? [Any])?.count)
    }

    @Test func theCheckFailsOnARejectionOrWhenNoDeviceWroteTheNewAttribute() {
        #expect(VerdictChecks.schemaUpgrade(.init(written: 12, held: 3, rejected: 0)).passed)
        let rejected = VerdictChecks.schemaUpgrade(.init(written: 12, held: 3, rejected: 2))
        #expect(!rejected.passed && rejected.detail.hasPrefix("2 change sets rejected for naming notes.mood"))
        #expect(!VerdictChecks.schemaUpgrade(.init(written: 0, held: 0, rejected: 0)).passed)
    }

    /// Seed 431's run: the notes written with the new attribute were all deleted with their
    /// players before the end, and the check said no device had learned the schema.
    @Test func theCheckPassesWhenEveryRecordWrittenWithTheNewAttributeWasDeletedSince() {
        let check = VerdictChecks.schemaUpgrade(.init(written: 370, held: 0, rejected: 0))
        #expect(check.passed)
        #expect(check.detail == "370 change sets committed with notes.mood (0 records hold it now), none rejected for it")
    }
}
