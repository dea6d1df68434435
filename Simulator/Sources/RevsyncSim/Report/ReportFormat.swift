import Foundation

/// How the report writes numbers, shared by the terminal table, the HTML page and the
/// progress line so the same figure reads the same everywhere.
enum ReportFormat {
    /// Non-finite values come from empty distributions; they print as "n/a" rather than "nan".
    static func decimal(_ value: Double, places: Int) -> String {
        guard value.isFinite else { return "n/a" }
        return String(format: "%.\(max(0, places))f", value)
    }

    static func milliseconds(_ value: Double) -> String {
        value.isFinite ? decimal(value, places: 1) + " ms" : "n/a"
    }

    static func seconds(_ value: Double) -> String {
        value.isFinite ? decimal(value, places: 1) + " s" : "n/a"
    }

    /// Binary units, because the byte counts are buffer sizes rather than disk marketing.
    static func bytes(_ count: Int) -> String {
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        guard abs(value) >= 1024 else { return "\(count) B" }
        var unit = 0
        value /= 1024
        while abs(value) >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return decimal(value, places: 1) + " " + units[unit]
    }

    /// Raw over wire: how many times smaller compression made the bodies.
    static func ratio(raw: Int, wire: Int) -> String {
        guard wire > 0 else { return "n/a" }
        return decimal(Double(raw) / Double(wire), places: 2) + "x"
    }

    /// Thousands separated by commas, independent of the process locale.
    static func count<Number: BinaryInteger>(_ value: Number) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { grouped.append(",") }
            grouped.append(digit)
        }
        return value < 0 ? "-" + grouped : grouped
    }
}
