import CompressNIO
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore

/// The OpenAPI document (`Sources/RevsyncServer/Resources/openapi.json`) as a contract that a
/// real answer of the server either keeps or breaks.
struct OpenAPIContract: Sendable {
    let document: OpenAPIJSON
    let validator: OpenAPISchemaValidator

    /// The document in the source tree (what the server bundles).
    static let sourceFile = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/RevsyncServer/Resources/openapi.json")

    static func load() throws -> OpenAPIContract {
        try OpenAPIContract(document: OpenAPIJSON.parse(Data(contentsOf: sourceFile)))
    }

    init(document: OpenAPIJSON) {
        self.document = document
        validator = OpenAPISchemaValidator(root: document)
    }

    static let methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

    /// Every operation of the document as "METHOD /template".
    var operations: [String] {
        var names: [String] = []
        for (template, item) in document["paths"]?.objectValue ?? [:] {
            for method in Self.methods where item[method] != nil { names.append("\(method.uppercased()) \(template)") }
        }
        return names.sorted()
    }

    /// The path template a concrete path falls under; literal segments win over parameters
    /// (`/devices/me` over `/devices/{id}`), as in the server's router.
    func template(for path: String, method: String) -> String? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        var best: (template: String, literals: Int)?
        for (template, item) in document["paths"]?.objectValue ?? [:] where item[method.lowercased()] != nil {
            let parts = template.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == segments.count else { continue }
            var literals = 0
            var fits = true
            for (part, segment) in zip(parts, segments) {
                if part.hasPrefix("{") && part.hasSuffix("}") {
                    fits = fits && !segment.isEmpty
                } else if part == segment {
                    literals += 1
                } else {
                    fits = false
                }
            }
            if fits, literals > best?.literals ?? -1 { best = (template, literals) }
        }
        return best?.template
    }

    /// Follows a `$ref` (for responses, headers and parameters), or returns the node itself.
    func dereference(_ node: OpenAPIJSON?) -> OpenAPIJSON? {
        guard let reference = node?["$ref"]?.stringValue else { return node }
        return dereference(validator.resolve(reference))
    }

    /// Every way an answer breaks the document: its status is not listed for the operation, its
    /// content type is not the documented one, a required header is missing or wrong, or its body
    /// does not match the response schema. Empty when the answer conforms.
    func problems(for exchange: OpenAPIExchange) -> [String] {
        let name = "\(exchange.method) \(exchange.path) → \(exchange.status)"
        guard let template = template(for: exchange.path, method: exchange.method),
            let operation = document["paths"]?[template]?[exchange.method.lowercased()]
        else {
            return ["\(name): the document has no operation for \(exchange.method) \(exchange.path)"]
        }
        let responses = operation["responses"]?.objectValue ?? [:]
        guard let response = dereference(responses[String(exchange.status)] ?? responses["default"]) else {
            let listed = responses.keys.sorted().joined(separator: ", ")
            return ["\(name): status \(exchange.status) is not documented for \(exchange.method) \(template) (documented: \(listed))"]
        }
        var found: [String] = []
        for (header, declaration) in response["headers"]?.objectValue ?? [:] {
            guard let declaration = dereference(declaration) else { continue }
            guard let value = exchange.headers[header.lowercased()] else {
                if declaration["required"]?.boolValue == true { found.append("\(name): the required header \(header) is missing") }
                continue
            }
            if let schema = declaration["schema"] {
                let typed: OpenAPIJSON = schema["type"]?.stringValue == "integer" ? (Int64(value).map { .integer($0) } ?? .string(value)) : .string(value)
                found += validator.problems(typed, against: schema, at: "header \(header)").map { "\(name): \($0)" }
            }
        }
        let contents = response["content"]?.objectValue ?? [:]
        if contents.isEmpty {
            if exchange.body.readableBytes > 0 { found.append("\(name): the document says no body, the server sent \(exchange.body.readableBytes) bytes") }
            return found
        }
        let contentType = exchange.headers["content-type"] ?? ""
        let mediaType = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        guard let media = contents[mediaType] else {
            return found + ["\(name): Content-Type \"\(contentType)\" is not one of the documented \(contents.keys.sorted().joined(separator: ", "))"]
        }
        guard let schema = media["schema"] else { return found }
        var body = exchange.body
        if exchange.headers["content-encoding"]?.lowercased() == "gzip" {
            do {
                body = try body.decompress(with: .gzip)
            } catch {
                return found + ["\(name): Content-Encoding gzip, but the body does not inflate: \(error)"]
            }
        }
        let value: OpenAPIJSON
        if mediaType == "application/json" {
            do {
                value = try OpenAPIJSON.parse(Data(body.readableBytesView))
            } catch {
                return found + ["\(name): the body is not JSON: \(String(buffer: body).prefix(200))"]
            }
        } else {
            value = .string(String(buffer: body))
        }
        found += validator.problems(value, against: schema).map { "\(name): \($0)" }
        return found
    }
}

/// One request and the server's real answer, as the conformance checks judge it.
struct OpenAPIExchange: Sendable {
    let method: String
    /// The path as sent, without a query.
    let path: String
    let status: Int
    /// Header values by lowercase name.
    let headers: [String: String]
    /// The body as received (still gzip-compressed if the server compressed it).
    let body: ByteBuffer

    /// The body inflated when compressed, as text.
    var text: String {
        var body = self.body
        if headers["content-encoding"]?.lowercased() == "gzip", let inflated = try? body.decompress(with: .gzip) { return String(buffer: inflated) }
        return String(buffer: body)
    }
}

extension TestHarness {
    /// Sends one request through the router and keeps everything the contract checks look at.
    func exchange(
        _ method: HTTPRequest.Method, _ path: String, token: String? = nil, body: ByteBuffer? = nil, headers extra: HTTPFields = [:]
    ) async throws -> OpenAPIExchange {
        var headers = extra
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await client.execute(uri: path, method: method, headers: headers, body: body) { response in
            var fields: [String: String] = [:]
            for field in response.headers { fields[field.name.canonicalName] = field.value }
            return OpenAPIExchange(method: method.rawValue, path: path, status: Int(response.status.code), headers: fields, body: response.body)
        }
    }
}
