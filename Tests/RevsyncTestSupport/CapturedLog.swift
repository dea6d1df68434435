import Logging
import Synchronization

/// What a logger logged, kept in memory for a test to read: `CapturedLog().logger`.
public final class CapturedLog: Sendable {
    public struct Entry: Sendable {
        public let level: Logger.Level
        public let message: String
        public let metadata: [String: String]
    }

    private let entries = Mutex<[Entry]>([])

    public init() {}

    public var logger: Logger {
        Logger(label: "revsync.tests.captured") { _ in Handler(log: self) }
    }

    public var all: [Entry] { entries.withLock { $0 } }

    fileprivate func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
            log.append(Entry(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}
