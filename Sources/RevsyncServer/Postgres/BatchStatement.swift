import PostgresNIO

/// One statement of several data-modifying parts (`WITH a AS (INSERT …), b AS (UPDATE …) …`),
/// so that a batch's writes cost one round trip. PostgresNIO runs one query at a time per
/// connection: merging has to happen in SQL.
struct BatchStatement {
    private(set) var binds = PostgresBindings()
    private var parts: [String] = []

    /// Binds `value` and returns its placeholder (`$n`).
    mutating func bind(_ value: some PostgresNonThrowingEncodable & Sendable) -> String {
        binds.append(value)
        return "$\(binds.count)"
    }

    /// Adds a part; `sql` is a whole data-modifying statement.
    mutating func add(_ sql: String) {
        parts.append(sql)
    }

    var isEmpty: Bool { parts.isEmpty }

    /// Parts so far: the last one added is named `w\(partCount - 1)`.
    var partCount: Int { parts.count }

    /// The statement; `final` reads the parts' results (by default, nothing).
    func query(final: String = "SELECT 1") -> PostgresQuery {
        let with = parts.enumerated().map { "w\($0.offset) AS (\($0.element))" }.joined(separator: ",\n")
        return PostgresQuery(unsafeSQL: (with.isEmpty ? "" : "WITH " + with + "\n") + final, binds: binds)
    }
}
