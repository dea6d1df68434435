import Foundation
import Hummingbird
import NIOCore
import RevsyncWire
import Testing
@testable import RevsyncServer

@Suite struct OperationsTests {
    @Test func schemaShowsTheCallersPermissions() async throws {
        try await withTestServer { harness in
            for (role, deleteInstances, createNotes) in [("member", false, true), ("viewer", false, false), ("admin", true, true)] {
                let device = try await harness.register(role, name: role)
                let (status, body) = try await harness.raw("/schema", method: .get, token: device.token)
                #expect(status == .ok)
                let document = try JSONDecoder().decode(SchemaDocument.self, from: Data(body.readableBytesView))
                #expect(document.version == 1)
                #expect(document.entities.count >= 12)
                #expect(document.entities.first { $0.name == "screen_instances" }?.permissions.delete == deleteInstances)
                #expect(document.entities.first { $0.name == "notes" }?.permissions.create == createNotes)
                let screenId = document.entities.first { $0.name == "screen_instances" }?.attributes.first { $0.name == "screen_id" }
                #expect(screenId?.references == "screens" && screenId?.onDelete == .cascade)
            }
        }
    }

    @Test func registrationRefusesUnknownRolesAndEmptyNames() async throws {
        try await withTestServer { harness in
            for body in ["{\"name\":\"a\",\"user\":\"b\",\"role\":\"owner\"}", "{\"name\":\"\",\"user\":\"b\",\"role\":\"member\"}", "{\"name\":\"a\"}"] {
                let (status, answer) = try await harness.raw("/devices", token: adminToken, body: ByteBuffer(string: body))
                #expect(status == .badRequest)
                #expect(try harness.error(answer).error == "invalid_request")
            }
        }
    }

    @Test func readinessAndMetricsReportTheServer() async throws {
        try await withTestServer { harness in
            let device = try await harness.register("member", name: "m")
            _ = try await harness.sync(device, from: 0, [changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": "x", "pinned": false]])))])
            _ = try await harness.sync(device, from: 1, [changeSet(seq: 2, ("leagues", EntityChanges(create: [-2], attributes: [-2: ["name": "x"]])))])
            #expect(try await harness.raw("/ready", method: .get, token: nil).0 == .ok)
            let (status, body) = try await harness.raw("/metrics", method: .get, token: nil)
            #expect(status == .ok)
            let text = String(buffer: body)
            #expect(text.contains("revsync_http_requests_total{route=\"/sync\",status=\"200\"} 2"))
            #expect(text.contains("revsync_change_sets_applied_total{entity=\"notes\"} 1"))
            #expect(text.contains("revsync_change_sets_rejected_total{reason=\"forbidden\",entity=\"leagues\"} 1"))
            #expect(text.contains("revsync_head_revision 1"))
            #expect(text.contains("revsync_catchup_duration_seconds"))
        }
    }

    /// A lagging device's catch-up page ends below the head, and requests finish in any
    /// order: neither may move the head gauge back.
    @Test func theHeadGaugeOnlyRises() {
        let metrics = ServerMetrics()
        for revision: Int64 in [5, 3, 7, 6, 1] { metrics.observeHead(revision) }
        let line = metrics.exposition().split(separator: "\n").first { $0.hasPrefix("revsync_head_revision ") }
        #expect(line.flatMap { Double($0.dropFirst("revsync_head_revision ".count)) } == 7)
    }
}
