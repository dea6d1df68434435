/// A registered device as the server knows it.
public struct Device: Sendable, Hashable {
    /// Internal key, stored in the log and the temporary-id map.
    public let id: Int64
    /// The id shown to clients (`deviceId`).
    public let publicId: String
    public let name: String
    public let user: String
    public let role: String

    package init(id: Int64, publicId: String, name: String, user: String, role: String) {
        self.id = id
        self.publicId = publicId
        self.name = name
        self.user = user
        self.role = role
    }
}
