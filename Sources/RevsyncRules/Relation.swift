import RevsyncWire

/// A reference from `child.attribute` to some parent entity, with its on-delete rule.
public struct Relation: Sendable, Hashable {
    public let child: String
    public let attribute: String
    public let rule: OnDeleteRule

    public init(child: String, attribute: String, rule: OnDeleteRule) {
        self.child = child
        self.attribute = attribute
        self.rule = rule
    }

    /// The relation `reference` of entity `child` makes; nil when it references nothing.
    /// A reference without an on-delete rule is `restrict`.
    public init?(child: String, reference: AttributeDescription) {
        guard reference.references != nil else { return nil }
        self.init(child: child, attribute: reference.name, rule: reference.onDelete ?? .restrict)
    }
}
