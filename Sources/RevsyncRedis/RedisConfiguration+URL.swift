extension RedisConfiguration {
    /// Reads `redis://host[:port][/db]`; the port defaults to 6379 and the database to 0.
    ///
    /// IPv6 hosts go in brackets (`redis://[::1]:6379`). Anything this client cannot honour —
    /// another scheme such as `rediss://`, credentials, query options — is rejected with an
    /// ``RedisError/invalidConfiguration(_:)`` that says what was wrong, rather than ignored.
    /// The timeouts and pool size keep their defaults.
    public init(url: String) throws(RedisError) {
        func invalid(_ why: String) -> RedisError {
            .invalidConfiguration("\(why) in Redis URL \"\(url)\"; expected redis://host:port[/db]")
        }

        let schemeSeparator = "://"
        guard let schemeEnd = url.firstRange(of: schemeSeparator) else { throw invalid("no scheme") }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "redis" else {
            throw scheme == "rediss"
                ? invalid("TLS (rediss://) is not supported") : invalid("unsupported scheme \"\(scheme)\"")
        }
        let rest = url[schemeEnd.upperBound...]
        if rest.contains("?") || rest.contains("#") { throw invalid("query options are not supported") }

        let authority: Substring
        let path: Substring
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            path = rest[rest.index(after: slash)...]
        } else {
            authority = rest
            path = ""
        }
        // This client never sends AUTH, so a password in the URL would be silently ignored.
        if authority.contains("@") { throw invalid("credentials are not supported") }

        let host: Substring
        let portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw invalid("unclosed \"[\"") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let afterHost = authority[authority.index(after: close)...]
            if afterHost.isEmpty {
                portText = nil
            } else if afterHost.hasPrefix(":") {
                portText = afterHost.dropFirst()
            } else {
                throw invalid("unexpected text after \"]\"")
            }
        } else {
            let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
            switch parts.count {
            case 1: (host, portText) = (parts[0], nil)
            case 2: (host, portText) = (parts[0], parts[1])
            default: throw invalid("an IPv6 host must be in brackets")
            }
        }
        guard !host.isEmpty else { throw invalid("no host") }

        var port = 6379
        if let portText {
            guard let value = Self.decimal(portText), (1...65535).contains(value) else {
                throw invalid("port \"\(portText)\" is not a number in 1...65535")
            }
            port = value
        }

        var database = 0
        if !path.isEmpty {
            guard let value = Self.decimal(path), value <= Int(Int32.max) else {
                throw invalid("database \"\(path)\" is not a non-negative number")
            }
            database = value
        }

        self.init(host: String(host), port: port, database: database)
    }

    /// The URL form of host, port and database (the timeouts and pool size have no place in it).
    public var url: String {
        "redis://\(endpoint)" + (database == 0 ? "" : "/\(database)")
    }

    /// Only ASCII digits: `Int("+5")` would accept a sign, which a URL should not have.
    private static func decimal(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text)
    }
}
