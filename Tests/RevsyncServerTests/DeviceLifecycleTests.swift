import Foundation
import NIOCore
import RevsyncLink
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Listing, revoking, rotating and re-roling devices with the admin token, on every instance.
@Suite struct DeviceLifecycleTests {
    static func note(_ seq: Int64) -> ChangeSet {
        changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": "n", "pinned": false]])))
    }

    static func decode<T: Decodable>(_ type: T.Type, _ body: ByteBuffer) throws -> T {
        try JSONDecoder().decode(type, from: Data(body.readableBytesView))
    }

    @Test func adminListsDevicesWithWhatTheServerKnowsOfThem() async throws {
        try await withTestServer { harness in
            let phone = try await harness.register("member", name: "phone")
            _ = try await harness.sync(phone, from: 0, [Self.note(1), Self.note(2)])
            let (status, body) = try await harness.raw("/devices", method: .get, token: adminToken)
            #expect(status == .ok)
            let listed = try #require(try Self.decode(DeviceList.self, body).devices.first { $0.deviceId == phone.id })
            #expect(listed.name == "phone")
            #expect(listed.role == "member")
            #expect(listed.lastSeq == 2)
            #expect(listed.lowestTemporaryId == -2)
            #expect(listed.revoked == nil)
            // The device asks about itself with its own token.
            let (meStatus, meBody) = try await harness.raw("/devices/me", method: .get, token: phone.token)
            #expect(meStatus == .ok)
            #expect(try Self.decode(DeviceInfo.self, meBody).lastSeq == 2)
            // A device token cannot list devices.
            #expect(try await harness.raw("/devices", method: .get, token: phone.token).0 == .unauthorized)
        }
    }

    @Test func revokedDeviceIsRefusedEverywhereAndCommitsNothing() async throws {
        try await withTestServer { harness in
            let phone = try await harness.register("member", name: "lost phone")
            _ = try await harness.sync(phone, from: 0, [Self.note(1)])
            let (status, _) = try await harness.raw("/devices/\(phone.id)", method: .delete, token: adminToken)
            #expect(status == .noContent)
            let (syncStatus, syncBody) = try await harness.post(phone, SyncRequest(maxRevision: 0, changeSets: [Self.note(2)]))
            #expect(syncStatus == .unauthorized)
            #expect(try harness.error(syncBody).message.contains("revoked"))
            #expect(try await harness.raw("/snapshot", method: .get, token: phone.token).0 == .unauthorized)
            #expect(try await harness.count("notes") == 1)
            let (_, list) = try await harness.raw("/devices", method: .get, token: adminToken)
            #expect(try Self.decode(DeviceList.self, list).devices.first { $0.deviceId == phone.id }?.revoked != nil)
            // Unknown or malformed ids are 404.
            #expect(try await harness.raw("/devices/\(UUID().uuidString)", method: .delete, token: adminToken).0 == .notFound)
            #expect(try await harness.raw("/devices/not-a-uuid", method: .delete, token: adminToken).0 == .notFound)
        }
    }

    /// The counter is read only when the subscription starts (a check every 600 s): the
    /// second instance keeps its cached device until the announcement arrives on its
    /// subscription, so without it the loop below ends at its bound and the test fails.
    @Test func revocationReachesAnotherInstanceThroughTheRedisFeed() async throws {
        try await withTestServer(configure: { $0.deviceCheckInterval = .seconds(600) }) { harness in
            let phone = try await harness.register("member", name: "phone")
            try await harness.withSecondInstance { other in
                try await eventually("the second instance follows device changes") { await other.server.devices.cache.followsChanges }
                // The other instance has the device cached.
                _ = try await other.sync(phone, from: 0)
                // Revoked on the first instance: the second refuses it at once for writes (the
                // commit checks the device's row) and for every request once the announcement
                // arrives. The loop's bound only ends a wait that would never end: with every
                // suite on two cores a message can be handled seconds late.
                #expect(try await harness.raw("/devices/\(phone.id)", method: .delete, token: adminToken).0 == .noContent)
                let (writeStatus, _) = try await other.post(phone, SyncRequest(maxRevision: 0, changeSets: [Self.note(1)]))
                #expect(writeStatus == .unauthorized)
                let started = ContinuousClock.now
                var refused = false
                while !refused && ContinuousClock.now - started < .seconds(15) {
                    refused = try await other.post(phone, SyncRequest(maxRevision: 0)).0 == .unauthorized
                    if !refused { try await Task.sleep(for: .milliseconds(20)) }
                }
                #expect(refused, "the second instance still served the revoked device after 15 s")
                #expect(await other.server.devices.cache.followsChanges)
                #expect(try await harness.count("notes") == 0)
            }
        }
    }

    /// A revocation whose announcement never reached Redis (made here through the directory,
    /// as the instance that made it does before announcing): the second instance follows
    /// changes on its subscription, so only PostgreSQL's count of device changes, read with the
    /// head, drops its cached device. Without it the loop ends at its bound and the test fails.
    @Test func revocationWhoseAnnouncementWasLostStillReachesAnotherInstance() async throws {
        try await withTestServer(configure: { $0.deviceCheckInterval = .seconds(600) }) { harness in
            let phone = try await harness.register("member", name: "phone")
            let rotated = try await harness.register("member", name: "tablet")
            try await harness.withSecondInstance { other in
                try await eventually("the second instance follows device changes") { await other.server.devices.cache.followsChanges }
                _ = try await other.sync(phone, from: 0)
                _ = try await other.sync(rotated, from: 0)
                #expect(try await harness.server.devices.directory.revoke(publicId: phone.id))
                #expect(try await harness.server.devices.directory.replaceToken(publicId: rotated.id, tokenHash: DeviceStore.hash("new")))
                let started = ContinuousClock.now
                var refused = (phone: false, rotated: false)
                while !(refused.phone && refused.rotated) && ContinuousClock.now - started < .seconds(15) {
                    if !refused.phone { refused.phone = try await other.post(phone, SyncRequest(maxRevision: 0)).0 == .unauthorized }
                    if !refused.rotated { refused.rotated = try await other.post(rotated, SyncRequest(maxRevision: 0)).0 == .unauthorized }
                    if !(refused.phone && refused.rotated) { try await Task.sleep(for: .milliseconds(20)) }
                }
                #expect(refused.phone, "the second instance still served the revoked device after 15 s")
                #expect(refused.rotated, "the second instance still took the replaced token after 15 s")
                // Nothing was announced: the subscription never lapsed, the count did it.
                #expect(await other.server.devices.cache.followsChanges)
            }
        }
    }

    /// An instance whose Redis goes silent (a partition: nothing arrives, nothing is closed)
    /// stops trusting its cached devices before any Redis call times out, and a revocation
    /// made on another instance reaches it from PostgreSQL. Its Redis command timeout here is a
    /// minute: before the watcher's lease, its cache trusted the silent subscription until the
    /// counter's read timed out, and the first wait below ended at its bound.
    @Test func revocationReachesAnInstanceWhoseRedisWentSilent() async throws {
        try await withTestServer { harness in
            let redis = try #require(harness.server.settings.redisURL.flatMap { URLComponents(string: $0) })
            let relay = try await TCPRelay.start(to: try #require(redis.host), port: redis.port ?? 6379)
            var through = redis
            through.host = "127.0.0.1"
            through.port = relay.port
            let phone = try await harness.register("member", name: "phone")
            do {
                try await harness.withSecondInstance(configure: {
                    $0.redisURL = through.string
                    $0.redisCommandTimeout = .seconds(60)
                }) { other in
                    do {
                        try await eventually("the second instance follows device changes") { await other.server.devices.cache.followsChanges }
                        _ = try await other.sync(phone, from: 0)
                        await relay.cut(.silent)
                        try await eventually("the cut-off instance stops trusting its cached devices", within: .seconds(15)) {
                            await !other.server.devices.cache.followsChanges
                        }
                        // Past the age a cached device may have then, so that the request below is
                        // authenticated from PostgreSQL rather than sent on to the silent Redis.
                        try await Task.sleep(for: .milliseconds(1100))
                        #expect(try await harness.raw("/devices/\(phone.id)", method: .delete, token: adminToken).0 == .noContent)
                        #expect(try await other.post(phone, SyncRequest(maxRevision: 0)).0 == .unauthorized)
                    } catch {
                        await relay.cut(.reset)
                        throw error
                    }
                    // Closed rather than silent: the instance's Redis calls end now, not in a minute.
                    await relay.cut(.reset)
                }
            } catch {
                await relay.stop()
                throw error
            }
            await relay.stop()
        }
    }

    @Test func revocationReachesAnotherInstanceWithoutRedis() async throws {
        try await withTestServer(configure: { $0.redisURL = nil }) { harness in
            let phone = try await harness.register("member", name: "phone")
            try await harness.withSecondInstance { other in
                _ = try await other.sync(phone, from: 0)
                #expect(try await harness.raw("/devices/\(phone.id)", method: .delete, token: adminToken).0 == .noContent)
                let started = ContinuousClock.now
                var refused = false
                // Without the Redis feed, cached devices live at most a second; the bound, as above,
                // only ends a wait that would never end.
                while !refused && ContinuousClock.now - started < .seconds(15) {
                    refused = try await other.post(phone, SyncRequest(maxRevision: 0)).0 == .unauthorized
                    if !refused { try await Task.sleep(for: .milliseconds(20)) }
                }
                #expect(refused)
            }
        }
    }

    @Test func rotatedTokenReplacesTheOldOne() async throws {
        try await withTestServer { harness in
            let phone = try await harness.register("member", name: "phone")
            _ = try await harness.sync(phone, from: 0)
            let (status, body) = try await harness.raw("/devices/\(phone.id)/token", method: .post, token: adminToken)
            #expect(status == .ok)
            let rotated = try Self.decode(RegisteredDevice.self, body)
            #expect(rotated.deviceId == phone.id)
            #expect(rotated.token != phone.token)
            #expect(try await harness.post(phone, SyncRequest(maxRevision: 0)).0 == .unauthorized)
            let renewed = TestDevice(id: phone.id, token: rotated.token)
            #expect(try await harness.sync(renewed, from: 0, [Self.note(1)]).committed.count == 1)
        }
    }

    @Test func roleChangeTakesEffectAtOnce() async throws {
        try await withTestServer { harness in
            let phone = try await harness.register("member", name: "phone")
            _ = try await harness.sync(phone, from: 0, [Self.note(1)])
            let request = ByteBuffer(string: #"{"role":"viewer"}"#)
            let (status, body) = try await harness.raw("/devices/\(phone.id)", method: .patch, token: adminToken, body: request)
            #expect(status == .ok)
            #expect(try Self.decode(DeviceInfo.self, body).role == "viewer")
            let refused = try await harness.sync(phone, from: 0, [Self.note(2)])
            #expect(refused.corrective.first?.reason?.code == .forbidden)
            let (schemaStatus, schema) = try await harness.raw("/schema", method: .get, token: phone.token)
            #expect(schemaStatus == .ok)
            #expect(!String(buffer: schema).contains(#""create":true"#))
            let unknown = ByteBuffer(string: #"{"role":"emperor"}"#)
            #expect(try await harness.raw("/devices/\(phone.id)", method: .patch, token: adminToken, body: unknown).0 == .badRequest)
        }
    }

    @Test func registrationWithANulCharacterIsABadRequest() async throws {
        try await withTestServer { harness in
            let body = ByteBuffer(string: #"{"name":"a\u0000b","user":"fuzz","role":"viewer"}"#)
            let (status, answer) = try await harness.raw("/devices", token: adminToken, body: body)
            #expect(status == .badRequest)
            #expect(try harness.error(answer).error == "invalid_request")
        }
    }

    @Test func severalAdminTokensAndATokenFileAreAccepted() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("revsync-admin-\(UUID().uuidString)").path
        try "# rotated on Monday\nfrom-file-1\n".write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        try await withTestServer(configure: { $0.adminToken = "\(adminToken), second-token"; $0.adminTokenFile = file }) { harness in
            for token in [adminToken, "second-token", "from-file-1"] {
                #expect(try await harness.raw("/devices", method: .get, token: token).0 == .ok, "\(token)")
            }
            #expect(try await harness.raw("/devices", method: .get, token: "from-file-2").0 == .unauthorized)
            // Editing the file takes effect without a restart.
            try "from-file-2\n".write(toFile: file, atomically: true, encoding: .utf8)
            #expect(try await harness.raw("/devices", method: .get, token: "from-file-2").0 == .ok)
            #expect(try await harness.raw("/devices", method: .get, token: "from-file-1").0 == .unauthorized)
        }
    }
}
