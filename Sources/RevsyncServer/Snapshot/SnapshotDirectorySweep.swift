import Foundation

/// What a sweep of the snapshot directory removes, from the names and modification times of
/// its entries (the caller lists and removes; work directories are `SnapshotWorkDirectory`'s).
///
/// Every instance sharing the directory sweeps it, so what one instance replaced and could not
/// remove (it was killed, or stopped) is removed by the others, and a directory kept across
/// restarts does not fill up with the files of earlier runs:
/// - a published file is replaced once a later file of the same database and schema version
///   is in the directory, and removed `keepReplaced` after that file was published (its
///   modification time), so that downloads that resume with `If-Range` still find it. "Later"
///   is by publication, not revision: a database restored from a backup has its files rebuilt
///   at a lower revision than the ones it had, and those replace the higher ones. The last
///   file of each database and schema version stays;
/// - a gzip copy without its file, and what versions before work directories left at the top
///   (`building-…` scratch files, `spool-…` directories), go once untouched for `leftoversAfter`.
struct SnapshotDirectorySweep: Sendable {
    struct Entry: Sendable, Equatable {
        let name: String
        let modified: Date
    }

    let keepReplaced: Duration
    var leftoversAfter: Duration = .seconds(86_400)

    func removals(_ entries: [Entry], now: Date) -> [String] {
        var removed: [String] = []
        var groups: [String: [(entry: Entry, revision: Int64)]] = [:]
        for entry in entries {
            guard let parts = SnapshotFileCatalog.parse(entry.name) else { continue }
            groups["\(parts.database)-v\(parts.schemaVersion)", default: []].append((entry, parts.revision))
        }
        for group in groups.values {
            let published = group.sorted { ($0.entry.modified, $0.revision) < ($1.entry.modified, $1.revision) }
            for (file, next) in zip(published, published.dropFirst()) where now.timeIntervalSince(next.entry.modified) >= keepReplaced.seconds {
                removed += [file.entry.name, file.entry.name + ".gz"]
            }
        }
        let names = Set(entries.map(\.name))
        for entry in entries where now.timeIntervalSince(entry.modified) >= leftoversAfter.seconds {
            let orphanCopy = entry.name.hasSuffix(".sqlite.gz") && SnapshotFileCatalog.parse(String(entry.name.dropLast(3))) != nil
                && !names.contains(String(entry.name.dropLast(3)))
            let oldScratch = entry.name.hasPrefix("building-") || entry.name.hasPrefix("spool-")
            if orphanCopy || oldScratch { removed.append(entry.name) }
        }
        return removed
    }
}
