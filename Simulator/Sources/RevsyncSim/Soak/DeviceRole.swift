/// The role each device of a run registers with: every tenth an admin, the rest
/// members, so the fault plan knows which devices a role downgrade can hit.
enum DeviceRole {
    static let admin = "admin"
    static let member = "member"
    static let viewer = "viewer"

    /// The role of the run's device number `index` (joiners included).
    static func of(_ index: Int) -> String { index % 10 == 0 ? admin : member }
}
