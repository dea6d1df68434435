import Histogram

/// Write-to-visible latency as arithmetic over events the caller times with one
/// clock: from the moment a device has the acknowledgement of its change set,
/// committed at revision R, to the moment each *other online* device has applied
/// revision R (its `maxRevision` reached R).
///
/// "Online" for R: when R is acknowledged, the device has loaded its first
/// snapshot, its link is up (not in an offline window), it is not being restarted
/// (a crash or a restore replacing its engine) and it is not revoked; and it stays
/// so until it applies R. A device that goes absent first is dropped for R (counted
/// apart): its wait would measure the outage, not sync. A server outage is not an
/// absence: a device whose server is down waits, as its user would. A device that
/// already holds R when the acknowledgement arrives (another device's catch-up can
/// beat the writer's own answer back through a slow link) counts as 0 and is
/// counted apart too.
///
/// Memory stays bounded: a histogram, and one entry per acknowledged revision some
/// device still awaits, with a bit per device; past `maxAwaited` entries the
/// oldest is given up (its devices counted as unresolved).
struct WriteToVisibleTracker {
    /// Why a device does not count.
    struct Absence: OptionSet, Hashable, Sendable {
        let rawValue: UInt8
        static let linkOffline = Absence(rawValue: 1)
        static let restarting = Absence(rawValue: 2)
        static let revoked = Absence(rawValue: 4)
    }

    private struct Device {
        /// The highest revision applied (a restore's step back is ignored: what it
        /// had applied was visible then).
        var revision: Int64 = 0
        var absence: Absence = []
        /// The highest revision acknowledged to it: a repeated acknowledgement (a
        /// resend after a lost answer) is not a new write.
        var lastAcknowledged: Int64 = 0

        var isOnline: Bool { revision > 0 && absence.isEmpty }
    }

    private struct Awaited {
        var revision: Int64
        var acknowledgedAt: ContinuousClock.Instant
        var waiting: DeviceBits
    }

    let maxAwaited: Int
    private var devices: [Device] = []
    /// In revision order.
    private var awaited: [Awaited] = []
    /// Microseconds.
    private var histogram = Histogram<UInt64>(
        lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    private(set) var acknowledgements = 0
    private(set) var seenBeforeAcknowledgement = 0
    private(set) var dropped = 0
    private var givenUp = 0

    init(maxAwaited: Int = 50_000) {
        self.maxAwaited = max(1, maxAwaited)
    }

    /// Device `writer` has the acknowledgement of its change set committed at `revision`.
    mutating func acknowledged(_ revision: Int64, by writer: Int, at instant: ContinuousClock.Instant) {
        ensure(writer)
        guard revision > devices[writer].lastAcknowledged else { return }
        devices[writer].lastAcknowledged = revision
        acknowledgements += 1
        var waiting = DeviceBits()
        for index in devices.indices where index != writer && devices[index].isOnline {
            if devices[index].revision >= revision {
                record(.zero)
                seenBeforeAcknowledgement += 1
            } else {
                waiting.insert(index)
            }
        }
        guard !waiting.isEmpty else { return }
        awaited.insert(Awaited(revision: revision, acknowledgedAt: instant, waiting: waiting), at: firstIndex(after: revision))
        if awaited.count > maxAwaited {
            givenUp += awaited.removeFirst().waiting.count
        }
    }

    /// Device `device` has applied everything up to `revision`.
    mutating func applied(_ revision: Int64, on device: Int, at instant: ContinuousClock.Instant) {
        ensure(device)
        let previous = devices[device].revision
        guard revision > previous else { return }
        devices[device].revision = revision
        // Before its first snapshot a device awaits nothing.
        guard previous > 0 else { return }
        let range = firstIndex(after: previous)..<firstIndex(after: revision)
        var emptied = false
        for index in range where awaited[index].waiting.remove(device) {
            record(instant - awaited[index].acknowledgedAt)
            emptied = emptied || awaited[index].waiting.isEmpty
        }
        if emptied {
            awaited.replaceSubrange(range, with: awaited[range].filter { !$0.waiting.isEmpty })
        }
    }

    /// Device `device` is absent for `reason` (or no longer is).
    mutating func setAbsent(_ reason: Absence, _ absent: Bool, device: Int) {
        ensure(device)
        let wasOnline = devices[device].isOnline
        if absent {
            devices[device].absence.insert(reason)
        } else {
            devices[device].absence.remove(reason)
        }
        guard wasOnline, !devices[device].isOnline else { return }
        for index in awaited.indices where awaited[index].waiting.remove(device) {
            dropped += 1
        }
        awaited.removeAll { $0.waiting.isEmpty }
    }

    /// The figures so far; awaited revisions count as unresolved.
    var summary: WriteToVisibleLatency {
        WriteToVisibleLatency(
            latency: ExchangeStats.percentiles(histogram), acknowledgements: acknowledgements,
            seenBeforeAcknowledgement: seenBeforeAcknowledgement, dropped: dropped,
            unresolved: givenUp + awaited.reduce(0) { $0 + $1.waiting.count })
    }

    private mutating func ensure(_ device: Int) {
        if device >= devices.count { devices += Array(repeating: Device(), count: device + 1 - devices.count) }
    }

    private mutating func record(_ latency: Duration) {
        let micros = UInt64(clamping: max(0, latency.microseconds))
        _ = histogram.record(min(micros, histogram.highestTrackableValue))
    }

    /// The index of the first awaited revision above `revision`.
    private func firstIndex(after revision: Int64) -> Int {
        var low = 0
        var high = awaited.count
        while low < high {
            let middle = (low + high) / 2
            if awaited[middle].revision > revision { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
