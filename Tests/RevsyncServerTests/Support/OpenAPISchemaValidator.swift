import Foundation

/// A small JSON Schema (2020-12, as OpenAPI 3.1 uses it) validator: just the keywords the
/// project's OpenAPI document uses. A keyword it does not know is reported as a problem
/// rather than ignored, so the document cannot silently outgrow the checks.
struct OpenAPISchemaValidator: Sendable {
    /// The whole OpenAPI document, against which `$ref`s (`#/components/…`) resolve.
    let root: OpenAPIJSON

    /// Keywords that constrain values.
    static let assertions: Set<String> = [
        "$ref", "type", "enum", "const", "properties", "required", "additionalProperties", "propertyNames",
        "items", "minItems", "maxItems", "uniqueItems", "minimum", "maximum", "minLength", "maxLength", "pattern",
        "allOf", "anyOf", "oneOf", "not", "format",
    ]
    /// Keywords that only document.
    static let annotations: Set<String> = ["description", "title", "examples", "example", "default", "deprecated", "readOnly", "writeOnly"]

    /// Every way `value` breaks `schema`, each with the JSON path where it happens; empty when it conforms.
    func problems(_ value: OpenAPIJSON, against schema: OpenAPIJSON, at path: String = "$") -> [String] {
        var found: [String] = []
        check(value, schema, path, &found, depth: 0)
        return found
    }

    /// Resolves a local reference such as `#/components/schemas/Error`.
    func resolve(_ reference: String) -> OpenAPIJSON? {
        guard reference.hasPrefix("#/") else { return nil }
        var node: OpenAPIJSON? = root
        for part in reference.dropFirst(2).split(separator: "/", omittingEmptySubsequences: false) {
            let key = part.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            node = node?[key]
        }
        return node
    }

    private func check(_ value: OpenAPIJSON, _ schema: OpenAPIJSON, _ path: String, _ found: inout [String], depth: Int) {
        guard depth < 64 else { return found.append("\(path): schema nests too deeply (a $ref cycle?)") }
        if case .bool(let accepts) = schema {
            if !accepts { found.append("\(path): no value is allowed here") }
            return
        }
        guard let keywords = schema.objectValue else { return found.append("\(path): the schema is not an object") }
        for keyword in keywords.keys where !Self.assertions.contains(keyword) && !Self.annotations.contains(keyword) {
            found.append("\(path): the validator does not support the keyword \"\(keyword)\"")
        }
        if let reference = keywords["$ref"]?.stringValue {
            guard let target = resolve(reference) else { return found.append("\(path): $ref \(reference) does not resolve") }
            check(value, target, path, &found, depth: depth + 1)
        }
        if let types = keywords["type"] {
            let allowed = Set((types.arrayValue ?? [types]).compactMap(\.stringValue))
            guard !allowed.isDisjoint(with: value.schemaTypes) else {
                // Nothing else can be judged on a value of the wrong type.
                return found.append("\(path): \(value.schemaTypes.sorted().last ?? "?") \(short(value)) is not of type \(allowed.sorted().joined(separator: " or "))")
            }
        }
        if let options = keywords["enum"]?.arrayValue, !options.contains(where: { $0.sameValue(as: value) }) {
            found.append("\(path): \(short(value)) is not one of \(OpenAPIJSON.array(options))")
        }
        if let constant = keywords["const"], !constant.sameValue(as: value) {
            found.append("\(path): \(short(value)) is not \(constant)")
        }
        checkNumber(value, keywords, path, &found)
        checkString(value, keywords, path, &found)
        checkArray(value, keywords, path, &found, depth: depth)
        checkObject(value, keywords, path, &found, depth: depth)
        checkCombinations(value, keywords, path, &found, depth: depth)
    }

    private func checkNumber(_ value: OpenAPIJSON, _ keywords: [String: OpenAPIJSON], _ path: String, _ found: inout [String]) {
        if case .integer(let number) = value {
            // Exact for int64 bounds, which a Double cannot hold.
            if case .integer(let minimum) = keywords["minimum"], number < minimum { found.append("\(path): \(number) is below \(minimum)") }
            if case .integer(let maximum) = keywords["maximum"], number > maximum { found.append("\(path): \(number) is above \(maximum)") }
            if case .number(let minimum) = keywords["minimum"], Double(number) < minimum { found.append("\(path): \(number) is below \(minimum)") }
            if case .number(let maximum) = keywords["maximum"], Double(number) > maximum { found.append("\(path): \(number) is above \(maximum)") }
        } else if case .number(let number) = value {
            if let minimum = keywords["minimum"]?.numericValue, number < minimum { found.append("\(path): \(number) is below \(minimum)") }
            if let maximum = keywords["maximum"]?.numericValue, number > maximum { found.append("\(path): \(number) is above \(maximum)") }
        }
    }

    private func checkString(_ value: OpenAPIJSON, _ keywords: [String: OpenAPIJSON], _ path: String, _ found: inout [String]) {
        guard case .string(let text) = value else { return }
        let length = text.unicodeScalars.count
        if let minimum = keywords["minLength"]?.numericValue, Double(length) < minimum { found.append("\(path): \(short(value)) is shorter than \(Int(minimum))") }
        if let maximum = keywords["maxLength"]?.numericValue, Double(length) > maximum { found.append("\(path): \(short(value)) is longer than \(Int(maximum))") }
        if let pattern = keywords["pattern"]?.stringValue, !Self.matches(text, pattern) {
            found.append("\(path): \(short(value)) does not match /\(pattern)/")
        }
        switch keywords["format"]?.stringValue {
        case "uuid":
            if UUID(uuidString: text) == nil { found.append("\(path): \(short(value)) is not a uuid") }
        case "date-time":
            if !Self.matches(text, #"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"#) {
                found.append("\(path): \(short(value)) is not an RFC 3339 date-time")
            }
        default: break  // int64, double…: annotations for strings, bounds carry the check for numbers
        }
    }

    private func checkArray(_ value: OpenAPIJSON, _ keywords: [String: OpenAPIJSON], _ path: String, _ found: inout [String], depth: Int) {
        guard case .array(let items) = value else { return }
        if let minimum = keywords["minItems"]?.numericValue, Double(items.count) < minimum { found.append("\(path): \(items.count) items, fewer than \(Int(minimum))") }
        if let maximum = keywords["maxItems"]?.numericValue, Double(items.count) > maximum { found.append("\(path): \(items.count) items, more than \(Int(maximum))") }
        if keywords["uniqueItems"]?.boolValue == true {
            for (index, item) in items.enumerated() where items[..<index].contains(where: { $0.sameValue(as: item) }) {
                found.append("\(path)[\(index)]: \(short(item)) is repeated")
            }
        }
        if let itemSchema = keywords["items"] {
            for (index, item) in items.enumerated() { check(item, itemSchema, "\(path)[\(index)]", &found, depth: depth + 1) }
        }
    }

    private func checkObject(_ value: OpenAPIJSON, _ keywords: [String: OpenAPIJSON], _ path: String, _ found: inout [String], depth: Int) {
        guard case .object(let members) = value else { return }
        let properties = keywords["properties"]?.objectValue ?? [:]
        for name in keywords["required"]?.arrayValue?.compactMap(\.stringValue) ?? [] where members[name] == nil {
            found.append("\(path): the required property \"\(name)\" is missing")
        }
        for (name, member) in members.sorted(by: { $0.key < $1.key }) {
            let memberPath = "\(path).\(name)"
            if let names = keywords["propertyNames"] {
                for problem in problems(.string(name), against: names, at: memberPath) { found.append("\(problem) (property name)") }
            }
            if let schema = properties[name] {
                check(member, schema, memberPath, &found, depth: depth + 1)
            } else if let additional = keywords["additionalProperties"] {
                if additional.boolValue == false {
                    found.append("\(memberPath): the property \"\(name)\" is not allowed")
                } else {
                    check(member, additional, memberPath, &found, depth: depth + 1)
                }
            }
        }
    }

    private func checkCombinations(_ value: OpenAPIJSON, _ keywords: [String: OpenAPIJSON], _ path: String, _ found: inout [String], depth: Int) {
        for schema in keywords["allOf"]?.arrayValue ?? [] { check(value, schema, path, &found, depth: depth + 1) }
        if let options = keywords["anyOf"]?.arrayValue {
            let outcomes = options.map { option -> [String] in var p: [String] = []; check(value, option, path, &p, depth: depth + 1); return p }
            if !outcomes.contains(where: \.isEmpty) {
                found.append("\(path): matches none of anyOf: " + outcomes.map { $0.first ?? "" }.joined(separator: " | "))
            }
        }
        if let options = keywords["oneOf"]?.arrayValue {
            let outcomes = options.map { option -> [String] in var p: [String] = []; check(value, option, path, &p, depth: depth + 1); return p }
            let matching = outcomes.filter(\.isEmpty).count
            if matching == 0 {
                // The closest option (fewest problems) explains the failure best.
                let closest = outcomes.min { $0.count < $1.count } ?? []
                found.append("\(path): matches none of oneOf; closest: " + closest.prefix(3).joined(separator: "; "))
            } else if matching > 1 {
                found.append("\(path): matches \(matching) of oneOf, not exactly one")
            }
        }
        if let negated = keywords["not"] {
            var p: [String] = []
            check(value, negated, path, &p, depth: depth + 1)
            if p.isEmpty { found.append("\(path): \(short(value)) matches a schema it must not match") }
        }
    }

    private func short(_ value: OpenAPIJSON) -> String {
        let text = value.description
        return text.count > 80 ? String(text.prefix(77)) + "…" : text
    }

    /// ECMA-262-style search (JSON Schema patterns are not anchored unless they say so).
    static func matches(_ text: String, _ pattern: String) -> Bool {
        guard let expression = try? NSRegularExpression(pattern: pattern) else { return false }
        return expression.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }

    /// Every keyword used anywhere in `schema` that the validator does not know (walks subschemas, not `$ref`s).
    static func unsupportedKeywords(in schema: OpenAPIJSON, at path: String) -> [String] {
        guard let keywords = schema.objectValue else { return [] }
        var found = keywords.keys.filter { !assertions.contains($0) && !annotations.contains($0) }.map { "\(path): \($0)" }
        for key in ["items", "additionalProperties", "propertyNames", "not"] {
            if let sub = keywords[key] { found += unsupportedKeywords(in: sub, at: "\(path)/\(key)") }
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            for (index, sub) in (keywords[key]?.arrayValue ?? []).enumerated() { found += unsupportedKeywords(in: sub, at: "\(path)/\(key)/\(index)") }
        }
        for (name, sub) in keywords["properties"]?.objectValue ?? [:] { found += unsupportedKeywords(in: sub, at: "\(path)/properties/\(name)") }
        return found
    }
}
