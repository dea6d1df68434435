enum HTMLEscaping {
    /// Escapes text for element content and quoted attribute values. "://" becomes
    /// "&#58;//": it reads the same in the browser, and the page source then never holds
    /// a URL, even when a replay command or an error detail names a server.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out.replacingOccurrences(of: "://", with: "&#58;//")
    }
}
