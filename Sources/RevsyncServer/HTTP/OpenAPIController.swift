import Foundation
import Hummingbird
import NIOCore

/// `GET /openapi.json`: the OpenAPI 3.1 document of the HTTP API (no auth), as bundled with the server.
struct OpenAPIController<Context: RequestContext>: Sendable {
    let document: ByteBuffer

    /// Serves the bundled document; a build without it stops here, when the application is made.
    init(document: ByteBuffer = OpenAPIDocument.bundled) {
        self.document = document
    }

    func addRoutes(to router: Router<Context>) {
        let document = self.document
        router.get("/openapi.json") { request, _ in
            JSONResponse.make(document, for: request)
        }
    }
}

/// The document in `Sources/RevsyncServer/Resources/openapi.json`, copied into the
/// `revsync_RevsyncServer.resources` bundle that SwiftPM puts beside the executable.
enum OpenAPIDocument {
    /// Read once, on first use (at startup), and checked to be an OpenAPI 3.1 JSON document.
    static let bundled: ByteBuffer = {
        switch load() {
        case .success(let document): return document
        // A server that cannot describe its API is a broken build or install: say so and stop.
        case .failure(let failure): fatalError(failure.description)
        }
    }()

    struct LoadFailure: Error, CustomStringConvertible {
        let description: String
    }

    static func load() -> Result<ByteBuffer, LoadFailure> {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json") else {
            return .failure(LoadFailure(description:
                "openapi.json is missing from the resource bundle \(Bundle.module.bundlePath): "
                + "install revsync_RevsyncServer.resources beside the revsync executable, as `swift build` leaves it"))
        }
        do {
            return parse(try Data(contentsOf: url), source: url.path)
        } catch {
            return .failure(LoadFailure(description: "\(url.path) cannot be read: \(error)"))
        }
    }

    static func parse(_ data: Data, source: String) -> Result<ByteBuffer, LoadFailure> {
        do {
            let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
            guard let version = object?["openapi"] as? String, version.hasPrefix("3.1.") else {
                return .failure(LoadFailure(description: "\(source) is not an OpenAPI 3.1 document (its \"openapi\" field is not 3.1.x)"))
            }
            return .success(ByteBuffer(bytes: data))
        } catch {
            return .failure(LoadFailure(description: "\(source) cannot be read as JSON: \(error)"))
        }
    }
}
