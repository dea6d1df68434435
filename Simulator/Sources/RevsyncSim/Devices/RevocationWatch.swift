import Foundation
import RevsyncDevice
import Synchronization

/// Watches the answers a device's token gets once the device has been revoked, or once its
/// token was rotated and until the device was given the new one (`replaced(at:)`).
/// Fed by `HTTPSyncTransport`'s observer (any task), told of the revocation by the run.
final class RevocationWatch: Sendable {
    /// The contract: a revocation reaches every server instance within one second.
    static let propagationBound: Duration = .seconds(1)

    private struct State {
        var revokedAt: ContinuousClock.Instant?
        /// The device was given a new token: what it sends from then on is not the old token's.
        var replacedAt: ContinuousClock.Instant?
        var accepted = 0
        var refused = 0
        var other = 0
        var acceptedWithinBound = 0
        var firstAccepted: String?
    }

    private let state = Mutex(State())

    /// The revocation was acknowledged (204) at `instant`.
    func revoked(at instant: ContinuousClock.Instant) {
        state.withLock { $0.revokedAt = instant }
    }

    /// The device was given its new token at `instant` (before its engine took it: whatever it
    /// sends from then on may carry either token, and is not counted).
    func replaced(at instant: ContinuousClock.Instant) {
        state.withLock { $0.replacedAt = instant }
    }

    /// Records one finished exchange; before the revocation, or once the token was replaced, it is ignored.
    func record(_ exchange: HTTPExchange) {
        let sent = ContinuousClock.now - exchange.duration
        state.withLock { state in
            guard let revokedAt = state.revokedAt, sent >= revokedAt else { return }
            if let replacedAt = state.replacedAt, sent >= replacedAt { return }
            let accepted = exchange.status.map { (200..<300).contains($0) } ?? false
            guard sent >= revokedAt + Self.propagationBound else {
                if accepted { state.acceptedWithinBound += 1 }
                return
            }
            if accepted {
                state.accepted += 1
                if state.firstAccepted == nil {
                    let after = String(format: "%.1f s", (sent - revokedAt).inSeconds)
                    state.firstAccepted = "\(exchange.path) answered \(exchange.status ?? 0), sent \(after) after the revocation"
                }
            } else if exchange.status == 401 {
                state.refused += 1
            } else {
                state.other += 1
            }
        }
    }

    /// What the device's token got since the revocation; nil if it was not revoked.
    func summary(device: String) -> RevokedDevice? {
        state.withLock { state in
            guard state.revokedAt != nil else { return nil }
            return RevokedDevice(
                device: device, accepted: state.accepted, refused: state.refused, other: state.other,
                acceptedWithinBound: state.acceptedWithinBound, firstAccepted: state.firstAccepted)
        }
    }
}
