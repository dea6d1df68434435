/// A device the run revoked, and what the answers to its token were from then on,
/// as the device saw them (its transport's exchange observer).
public struct RevokedDevice: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The device's public id, lowercased.
    public var device: String
    /// Requests sent at least the contract's propagation bound (one second) after the
    /// revocation was acknowledged that got a 2xx answer: each one a violation.
    public var accepted: Int
    /// Of those requests, the ones refused with 401.
    public var refused: Int
    /// Of those requests, the ones with another status or no answer (a server down, a link fault).
    public var other: Int
    /// Requests sent within the bound that got a 2xx answer (allowed: another instance may not know yet).
    public var acceptedWithinBound: Int
    /// The first violation: path, status and how long after the revocation it was sent.
    public var firstAccepted: String?

    public init(device: String, accepted: Int, refused: Int, other: Int, acceptedWithinBound: Int = 0, firstAccepted: String? = nil) {
        self.device = device.lowercased()
        self.accepted = accepted
        self.refused = refused
        self.other = other
        self.acceptedWithinBound = acceptedWithinBound
        self.firstAccepted = firstAccepted
    }

    public var description: String {
        var text = "device \(device): \(accepted) accepted, \(refused) refused"
        if let firstAccepted { text += " (first: \(firstAccepted))" }
        return text
    }
}

/// What PostgreSQL holds of a revoked device after its revocation.
public struct CommitAfterRevocation: Sendable, Hashable, Codable, CustomStringConvertible {
    public var device: String
    /// `revsync_devices.revoked_at`, as PostgreSQL prints it.
    public var revokedAt: String
    /// Log entries of the device with `committed_at` at or after `revokedAt`.
    public var entries: Int64
    public var firstRevision: Int64

    public init(device: String, revokedAt: String, entries: Int64, firstRevision: Int64) {
        self.device = device.lowercased()
        self.revokedAt = revokedAt
        self.entries = entries
        self.firstRevision = firstRevision
    }

    public var description: String {
        "device \(device) revoked at \(revokedAt): \(entries) log entries committed since, first at revision \(firstRevision)"
    }
}

/// The revocations PostgreSQL knows of; nil `revoked` when `revsync_devices` has no
/// `revoked_at` column (a server from before revocation existed).
public struct RevocationAudit: Sendable, Hashable, Codable {
    /// Devices with `revoked_at` set (public ids, lowercased).
    public var revoked: Set<String>
    public var commitsAfter: [CommitAfterRevocation]

    public init(revoked: Set<String>, commitsAfter: [CommitAfterRevocation]) {
        self.revoked = Set(revoked.map { $0.lowercased() })
        self.commitsAfter = commitsAfter
    }
}
