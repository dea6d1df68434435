import Foundation

/// The bearer tokens that may manage devices.
///
/// Several may be valid at once, so an operator can add a new one, move every tool to
/// it, then remove the old one: from `REVSYNC_ADMIN_TOKEN` (comma-separated) and from
/// `REVSYNC_ADMIN_TOKEN_FILE` (one per line, `#` comments). The file is read on every
/// admin request, so editing it takes effect without a restart.
package struct AdminTokens: Sendable {
    let inline: [String]
    let file: String?

    init(inline: String?, file: String?) {
        self.inline = Self.parse(inline ?? "", separator: ",")
        self.file = file
    }

    var isConfigured: Bool { !inline.isEmpty || file != nil }

    /// Whether `token` is one of the admin tokens; compared in constant time against each.
    func accepts(_ token: String) throws -> Bool {
        var tokens = inline
        if let file {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw StoreError.inconsistent("the admin token file \(file) (REVSYNC_ADMIN_TOKEN_FILE) cannot be read")
            }
            tokens += Self.parse(text, separator: "\n")
        }
        // Every candidate is compared, so the time taken does not tell which one matched.
        return tokens.map { DeviceStore.constantTimeEqual(token, $0) }.contains(true)
    }

    /// The tokens of a file (`separator` a newline) or of `REVSYNC_ADMIN_TOKEN` (a comma): each
    /// trimmed of spaces and line ends (CRLF files included), empty ones and `#` comments left out.
    // `package`: `revsync devices` reads the same settings the same way.
    package static func parse(_ text: String, separator: Character) -> [String] {
        // A CRLF line end is one `Character`, not "\n": lines are split at any line end.
        (separator.isNewline ? text.split(whereSeparator: \.isNewline) : text.split(separator: separator))
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }
}
