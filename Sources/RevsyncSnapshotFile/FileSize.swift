import Foundation

/// A file's size, nil when there is no such file.
public func fileSize(atPath path: String) -> Int? {
    (try? FileManager.default.attributesOfItem(atPath: path))?[.size].flatMap { ($0 as? NSNumber)?.intValue }
}
