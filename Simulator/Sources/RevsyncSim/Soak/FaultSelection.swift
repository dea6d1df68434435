import Foundation

/// What `--faults` switches on.
public enum FaultSelection {
    /// Comma-separated `--faults` names (`server-kill`, `device-restore`, …), `all` or
    /// `none`; the report's spelling (`server_kill`) is accepted too.
    public static func parse(_ text: String) throws -> Set<FaultKind> {
        var kinds: Set<FaultKind> = []
        for name in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            switch name {
            case "all": kinds.formUnion(FaultKind.switchable)
            case "none": continue
            default:
                guard let kind = FaultKind.switchable.first(where: { $0.optionName == name || $0.rawValue == name }) else {
                    let known = FaultKind.switchable.map(\.optionName).joined(separator: ", ")
                    throw SoakError("--faults: unknown fault \"\(name)\"; use \(known), all or none")
                }
                kinds.insert(kind)
            }
        }
        return kinds
    }
}
