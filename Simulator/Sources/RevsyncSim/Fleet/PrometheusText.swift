/// One sample line of the Prometheus text exposition: `name{label="value",…} value [timestamp]`.
public struct PrometheusSample: Sendable, Equatable {
    public var name: String
    public var labels: [String: String]
    public var value: Double

    public init(name: String, labels: [String: String] = [:], value: Double) {
        self.name = name
        self.labels = labels
        self.value = value
    }
}

/// Reads the Prometheus text exposition format (version 0.0.4).
///
/// Tolerant on purpose: a scrape may be cut short by a killed server, so a line that
/// does not parse is skipped rather than failing the whole scrape.
public enum PrometheusText {
    /// Every sample line; comments (`# TYPE`, `# HELP`), blank and malformed lines are skipped.
    public static func parse(_ text: String) -> [PrometheusSample] {
        text.split(whereSeparator: \.isNewline).compactMap { parseLine(Substring($0)) }
    }

    /// One sample line, or nil for a comment, a blank or a malformed line.
    public static func parseLine(_ line: Substring) -> PrometheusSample? {
        var rest = line.drop(while: { $0 == " " || $0 == "\t" })
        guard let first = rest.first, first != "#" else { return nil }

        let nameEnd = rest.firstIndex(where: { !isNameCharacter($0) }) ?? rest.endIndex
        let name = String(rest[..<nameEnd])
        guard !name.isEmpty else { return nil }
        rest = rest[nameEnd...]

        var labels: [String: String] = [:]
        if rest.first == "{" {
            guard let parsed = parseLabels(&rest) else { return nil }
            labels = parsed
        }

        // The value, then an optional timestamp we have no use for.
        let fields = rest.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let valueText = fields.first, let value = parseValue(valueText) else { return nil }
        return PrometheusSample(name: name, labels: labels, value: value)
    }

    /// `+Inf`, `-Inf` and `NaN` as the format spells them; otherwise a Go-style float.
    public static func parseValue(_ text: Substring) -> Double? {
        switch text {
        case "+Inf", "Inf": .infinity
        case "-Inf": -.infinity
        case "NaN": .nan
        default: Double(text)
        }
    }

    private static func isNameCharacter(_ character: Character) -> Bool {
        character.isASCII && (character.isLetter || character.isNumber || character == "_" || character == ":")
    }

    /// Consumes `{key="value",…}` from the front of `text`; values may contain `\\`, `\"` and `\n`.
    private static func parseLabels(_ text: inout Substring) -> [String: String]? {
        var labels: [String: String] = [:]
        text = text.dropFirst()  // "{"
        while true {
            text = text.drop(while: { $0 == " " || $0 == "," })
            guard let next = text.first else { return nil }
            if next == "}" {
                text = text.dropFirst()
                return labels
            }
            guard let equals = text.firstIndex(of: "=") else { return nil }
            let key = String(text[..<equals]).trimmingSpaces()
            guard !key.isEmpty, key.allSatisfy(isNameCharacter) else { return nil }
            text = text[text.index(after: equals)...].drop(while: { $0 == " " })
            guard text.first == "\"" else { return nil }
            text = text.dropFirst()
            var value = ""
            var escaped = false
            var closed = false
            while let character = text.first {
                text = text.dropFirst()
                if escaped {
                    value.append(character == "n" ? "\n" : character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    closed = true
                    break
                } else {
                    value.append(character)
                }
            }
            guard closed else { return nil }
            labels[key] = value
        }
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
