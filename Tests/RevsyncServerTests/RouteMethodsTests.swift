import Hummingbird
import Testing
@testable import RevsyncServer

/// Which methods a path takes, matched as the router's trie matches it (`RouteMethods`).
@Suite struct RouteMethodsTests {
    static let table = RouteMethods([
        ("/sync", .post), ("/devices", .get), ("/devices", .post), ("/devices/me", .get), ("/devices/:id", .delete),
        ("/devices/:id", .patch), ("/devices/:id/token", .post), ("/files/**", .get), ("/photos/*.jpg", .get),
    ])

    @Test func aPathTakesTheMethodsOfTheMostSpecificRoutePathThatMatches() {
        #expect(Self.table.allowed(at: "/sync") == ["POST"])
        #expect(Self.table.allowed(at: "/devices") == ["GET", "POST"])
        // The router takes `me` as the literal, never as the capture: DELETE /devices/me is not served.
        #expect(Self.table.allowed(at: "/devices/me") == ["GET"])
        #expect(Self.table.allowed(at: "/devices/0f9e") == ["DELETE", "PATCH"])
        #expect(Self.table.allowed(at: "/devices/0f9e/token") == ["POST"])
    }

    @Test func emptySegmentsAreIgnoredAsTheRouterIgnoresThem() {
        #expect(Self.table.allowed(at: "/sync/") == ["POST"])
        #expect(Self.table.allowed(at: "//devices//x") == ["DELETE", "PATCH"])
    }

    @Test func pathsNoRouteHasGiveNothing() {
        #expect(Self.table.allowed(at: "/").isEmpty)
        #expect(Self.table.allowed(at: "/syncs").isEmpty)
        #expect(Self.table.allowed(at: "/devices/a/token/b").isEmpty)
        #expect(Self.table.allowed(at: "/devices/a/b").isEmpty)
        #expect(Self.table.allowed(at: "/photos/cat.png").isEmpty)
        #expect(Self.table.allowed(at: "/files").isEmpty)
    }

    @Test func wildcardsMatchWhatTheRouterWouldTake() {
        #expect(Self.table.allowed(at: "/photos/cat.jpg") == ["GET"])
        #expect(Self.table.allowed(at: "/files/a") == ["GET"])
        #expect(Self.table.allowed(at: "/files/a/b/c") == ["GET"])
    }
}
