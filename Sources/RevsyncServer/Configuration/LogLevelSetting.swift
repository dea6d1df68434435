import Logging

extension Logger.Level {
    /// The level a setting names (`REVSYNC_LOG_LEVEL`, `--log-level`); unset or empty is
    /// `info`. Anything else is refused by the setting's name: a misspelt `debug` would
    /// otherwise log at `info` and leave the operator wondering where the detail went.
    public init(setting text: String?, named name: String) throws {
        guard let text, !text.isEmpty else {
            self = .info
            return
        }
        guard let level = Logger.Level(rawValue: text) else {
            let levels = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
            throw SettingsError("\(name) must be one of \(levels), not \"\(text)\"")
        }
        self = level
    }
}
