import HTTPTypes
import Hummingbird
import Synchronization

/// The methods the server serves at a path, from the router's own routes, so that a request
/// whose path is served under other methods is answered `405 method_not_allowed` with `Allow`
/// (RFC 9110, 15.5.6) instead of `404`: a client that sent `GET /sync` learns it must POST.
///
/// Hummingbird's router answers both cases with the same 404 and keeps the difference to
/// itself, so the routes are matched again here, only for requests the router did not answer.
/// Like its trie, a path goes to one route path, the most specific that matches (a literal
/// before a capture, element by element: `/devices/me` before `/devices/{id}`), and the
/// methods are that route path's alone.
struct RouteMethods: Sendable {
    private struct Route: Sendable {
        let path: RouterPath
        /// Each element's specificity, as the trie orders siblings.
        let priorities: [Int]
        var methods: [String]
    }

    private let routes: [Route]

    /// - Parameter headForGet: the router generates `HEAD` for every route path with `GET` and
    ///   none of its own (`RouterOptions.autoGenerateHeadEndpoints`), which `router.routes` does
    ///   not list: `Allow` names it all the same.
    init(_ routes: [(path: RouterPath, method: HTTPRequest.Method)], headForGet: Bool = false) {
        var byPath: [String: Route] = [:]
        var order: [String] = []
        for (path, method) in routes {
            let key = path.description
            if byPath[key] == nil {
                byPath[key] = Route(path: path, priorities: path.map(Self.priority), methods: [])
                order.append(key)
            }
            byPath[key]?.methods.append(method.rawValue)
        }
        if headForGet {
            for key in order where byPath[key]?.methods.contains("GET") == true { byPath[key]?.methods.append("HEAD") }
        }
        self.routes = order.compactMap { byPath[$0] }
    }

    /// The methods served at `path`, sorted; empty when no route has this path.
    func allowed(at path: String) -> [String] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        let chosen = routes.filter { Self.matches($0.path, segments) }.max { $0.priorities.lexicographicallyPrecedes($1.priorities) }
        return Set(chosen?.methods ?? []).sorted()
    }

    /// Element by element as the router's trie matches them; `**` takes whatever is left.
    private static func matches(_ path: RouterPath, _ segments: [Substring]) -> Bool {
        var index = 0
        for element in path {
            if element.description == "**" { return index < segments.count }
            guard index < segments.count, element ~= segments[index] else { return false }
            index += 1
        }
        return index == segments.count
    }

    /// The trie's order of siblings (Hummingbird keeps it internal), read from the element's
    /// description: a literal, a capture with a fixed part (`{id}.jpg`), a wildcard with one
    /// (`*.jpg`), a capture, `*`, `**`.
    private static func priority(_ element: RouterPath.Element) -> Int {
        let text = element.description
        if text == "**" { return -5 }
        if text == "*" { return -4 }
        if text.hasPrefix("{") && text.hasSuffix("}") && text.firstIndex(of: "}") == text.index(before: text.endIndex) { return -3 }
        if text.contains("{") { return -1 }
        if text.contains("*") { return -2 }
        return 0
    }
}

/// The router's routes, known once they are all added: the middleware that answers for
/// unmatched requests is added to the router before them (Hummingbird wraps each route in the
/// middlewares present when it is added).
final class KnownRoutes: Sendable {
    private let methods = Mutex(RouteMethods([]))

    func learn(_ routes: [Router<RevsyncRequestContext>.RouteDescription], headForGet: Bool) {
        let table = RouteMethods(routes.map { ($0.path, $0.method) }, headForGet: headForGet)
        methods.withLock { $0 = table }
    }

    func allowed(at path: String) -> [String] { methods.withLock { $0 }.allowed(at: path) }
}
