import RevsyncRules
import RevsyncWire
import Testing

@Suite struct SchemaNamesTests {
    @Test func namesAreLowercaseLettersDigitsAndUnderscoreBeginningWithALetter() {
        for name in ["notes", "screen_instance_items", "x1", "a_", String(repeating: "a", count: 63)] {
            #expect(SchemaNames.isIdentifier(name), "\(name)")
        }
        for name in ["", "_x", "1abc", "Notes", "n-1", "ä", "a b", String(repeating: "a", count: 64)] {
            #expect(!SchemaNames.isIdentifier(name), "\(name)")
        }
    }

    @Test func reservedNamesAreTheChangeSetKeysTheServersTablesAndTheRecordColumns() {
        for name in ["seq", "conflict", "revision", "reason", "resync", "types", "revsync_devices"] {
            #expect(SchemaNames.isReservedEntityName(name), "\(name)")
        }
        #expect(!SchemaNames.isReservedEntityName("notes"))
        for name in ["id", "revision", "rs_writer"] { #expect(SchemaNames.isReservedAttributeName(name), "\(name)") }
        #expect(!SchemaNames.isReservedAttributeName("ids"))
    }
}

@Suite struct UnknownNamesTests {
    /// What a change set names beyond a schema: an entity, or an attribute of a known entity
    /// (`revision` and `__oldId__` are the record's own, not attributes).
    @Test func theFirstEntityOrAttributeTheSchemaLacks() throws {
        let schema = try Fixtures.defaultSchema()
        func note(_ attributes: Attributes) -> ChangeSet {
            ChangeSet(seq: 1, types: ["notes"], entities: ["notes": EntityChanges(create: [-1], attributes: [-1: attributes])])
        }
        #expect(schema.firstUnknownName(in: [note(["body": "b", "revision": 3, "__oldId__": -1])]) == nil)
        #expect(schema.firstUnknownName(in: [note(["body": "b"]), note(["body": "b", "color": "red"])]) == "notes.color")
        let tags = ChangeSet(seq: 2, types: ["tags"], entities: ["tags": EntityChanges(create: [-2], attributes: [-2: ["name": "x"]])])
        #expect(schema.firstUnknownName(in: [tags]) == "tags")
    }
}

@Suite struct AttributeValueTests {
    let text = AttributeDescription(name: "body", type: .string, nullable: false)
    let reference = AttributeDescription(name: "player_id", type: .integer, nullable: true, references: "players", onDelete: .cascade)

    @Test func valuesComeBackInTheirCanonicalForm() throws {
        #expect(try AttributeDescription(name: "d", type: .double, nullable: false).checked(3) == .double(3))
        #expect(try AttributeDescription(name: "t", type: .timestamp, nullable: false).checked("2024-01-02T03:04:05Z")
            == .string(try #require(Timestamp.canonical("2024-01-02T03:04:05Z"))))
        #expect(try reference.checked(.null) == .null)
        #expect(try reference.checked(-4) == -4, "a temporary id is for the caller to resolve")
    }

    @Test func wrongValuesAreRefusedWithTheEndOfASentence() {
        #expect(throws: ValueProblem("may not be null")) { try text.checked(.null) }
        #expect(throws: ValueProblem("must be a string, not an integer")) { try text.checked(5) }
        #expect(throws: ValueProblem("contains a NUL character (U+0000), which text cannot hold")) { try text.checked("a\u{0}b") }
        #expect(throws: ValueProblem("holds 0, which is no record id")) { try reference.checked(0) }
        #expect(throws: ValueProblem.self) { try AttributeDescription(name: "t", type: .timestamp, nullable: false).checked("yesterday") }
    }
}
