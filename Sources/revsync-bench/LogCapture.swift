import Foundation
import Logging
import Synchronization

/// Keeps the messages of one logger, so that the bench can tell from the device engine's own
/// words which snapshot a bootstrap loaded (the engine falls back to JSON by itself), and
/// writes warnings and worse to stderr, where the bench's child keeps its diagnostics.
final class LogCapture: Sendable {
    struct Line: Sendable {
        let level: Logger.Level
        let message: String
        let metadata: Logger.Metadata
    }

    private let lines = Mutex<[Line]>([])

    func logger(label: String, level: Logger.Level = .info) -> Logger {
        var logger = Logger(label: label) { _ in Handler(capture: self) }
        logger.logLevel = level
        return logger
    }

    var captured: [Line] { lines.withLock { $0 } }

    fileprivate func append(_ line: Line) { lines.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var metadataProvider: Logger.MetadataProvider?
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            capture.append(Line(level: event.level, message: event.message.description, metadata: merged))
            if event.level >= .warning {
                let details = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                FileHandle.standardError.write(Data("\(event.level): \(event.message) \(details)\n".utf8))
            }
        }
    }
}
