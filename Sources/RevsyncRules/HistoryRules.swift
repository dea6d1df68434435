import RevsyncWire

/// The rules of the database's history id (`revsync_head.history`). Revisions are numbered
/// gap-free, so a database that went back (restored from a backup, or a replica promoted that
/// lacked the last commits) numbers its next commits as revisions devices may already hold
/// with other contents. The history id names one line of revisions: it is renewed when the
/// database is found to have gone back, and a device whose id is not the database's loads a
/// new snapshot instead of catching up over revisions that are not the database's.
public enum HistoryRules {
    /// A request naming a history (`claimed`) must name the database's (`current`). Either nil:
    /// nothing to compare (a device that never received one, a server that has not read it yet).
    public static func check(claimed: String?, current: String?) throws(SyncRefusal) {
        guard let claimed, let current, claimed != current else { return }
        throw SyncRefusal(
            .historyChanged,
            "the database went back since this device last synced (restored from a backup, or failed over): "
                + "the revisions it holds may not be the database's; bootstrap from GET /snapshot (pending change sets are kept)")
    }

    /// The database holds another id than this instance does. One set after the instance's
    /// (`heldSince`) is a renewal made elsewhere (another instance, `revsync restored`): adopt
    /// it. One set before is an older line a restore brought back, from a backup made before the
    /// held id was set: renew it, since devices may still hold that line's revisions past the
    /// backup's head (they went offline before the held id was set), which the database will
    /// number again.
    public static func isOlderLine(databaseSince: HistorySince, heldSince: HistorySince) -> Bool {
        databaseSince < heldSince
    }

    /// A head read below the highest one this instance saw committed or read means the database
    /// went back: its revisions from `head + 1` on will be numbered again.
    public static func wentBack(head: Int64, highestSeen: Int64) -> Bool {
        head < highestSeen
    }
}

/// When a history id was set: microseconds since 1970 by the database's clock
/// (`revsync_head.history_since`). Unknown (nil) for an id set before that was recorded, and
/// then older than any known time.
public struct HistorySince: Sendable, Hashable, Comparable {
    public let microseconds: Int64?

    public init(microseconds: Int64?) { self.microseconds = microseconds }

    public static func < (lhs: HistorySince, rhs: HistorySince) -> Bool {
        (lhs.microseconds ?? .min) < (rhs.microseconds ?? .min)
    }
}
