import Hummingbird
import HummingbirdTesting
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

    @Test func theRoutersGeneratedHeadIsAllowedWhereGetIs() {
        let table = RouteMethods([("/health", .get), ("/sync", .post), ("/snapshot", .get), ("/snapshot", .head)], headForGet: true)
        #expect(table.allowed(at: "/health") == ["GET", "HEAD"])
        #expect(table.allowed(at: "/sync") == ["POST"])
        #expect(table.allowed(at: "/snapshot") == ["GET", "HEAD"])
        #expect(Self.table.allowed(at: "/devices/me") == ["GET"])
    }

    @Test func wildcardsMatchWhatTheRouterWouldTake() {
        #expect(Self.table.allowed(at: "/photos/cat.jpg") == ["GET"])
        #expect(Self.table.allowed(at: "/files/a") == ["GET"])
        #expect(Self.table.allowed(at: "/files/a/b/c") == ["GET"])
    }
}

/// The middleware's answer to a 404: 405 only when the router did not take the method.
@Suite struct UnroutedAnswerTests {
    @Test func aRouteThatThrowsNotFoundItselfStays404() async throws {
        let router = Router(context: RevsyncRequestContext.self)
        let routes = KnownRoutes()
        router.middlewares.add(ObservationMiddleware(metrics: ServerMetrics(), maxInFlight: 10, inFlight: BoundedCount(), routes: routes))
        // As Hummingbird's file loading does for a file that is gone.
        router.get("/file") { _, _ -> Response in throw HTTPError(.notFound) }
        routes.learn(router.routes, headForGet: false)
        try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/file", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(response.headers[.allow] == nil)
            }
            try await client.execute(uri: "/file", method: .post) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.headers[.allow] == "GET")
            }
        }
    }
}
