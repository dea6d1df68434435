import Foundation

/// A linear axis starting at zero (or below) with a few round tick values.
struct ChartAxis: Equatable {
    var lower: Double
    var upper: Double
    var step: Double

    /// Covers `values` (finite ones; none gives 0…1), always including zero, with about
    /// `targetTicks` intervals. `roundUpper` extends the top to a tick (value axes); time
    /// axes end at the last value so the plot has no empty tail.
    init(covering values: [Double], targetTicks: Int, roundUpper: Bool = true) {
        let finite = values.filter(\.isFinite)
        var low = min(0, finite.min() ?? 0)
        var high = max(0, finite.max() ?? 1)
        if high <= low { high = low + 1 }
        let step = Self.roundStep((high - low) / Double(max(1, targetTicks)))
        low = (low / step).rounded(.down) * step
        if roundUpper { high = (high / step).rounded(.up) * step }
        if high <= low { high = low + step }
        self.lower = low
        self.upper = high
        self.step = step
    }

    var ticks: [Double] {
        // Multiplying the index avoids drifting by repeated addition; the tolerance keeps a
        // tick that float error puts a hair above `upper`; the cap guards odd floats.
        let intervals = ((upper - lower) / step + 1e-9).rounded(.down)
        let count = intervals.isFinite ? Int(min(50, max(0, intervals))) : 0
        return (0...count).map { lower + Double($0) * step }
    }

    /// Maps `value` from the axis onto `start…end` (screen coordinates may run backwards).
    func position(_ value: Double, from start: Double, to end: Double) -> Double {
        start + (value - lower) / (upper - lower) * (end - start)
    }

    /// 1, 2 or 5 times a power of ten, the smallest at least `raw`.
    static func roundStep(_ raw: Double) -> Double {
        guard raw.isFinite, raw > 0 else { return 1 }
        let magnitude = pow(10, (log10(raw)).rounded(.down))
        let fraction = raw / magnitude
        let nice: Double = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10
        return nice * magnitude
    }

    /// A short tick label: "250", "12.5k", "1.2M", or decimals when the step is below one.
    func label(_ value: Double) -> String {
        if step < 1 {
            let places = min(6, Int((-log10(step)).rounded(.up)))
            return ReportFormat.decimal(value, places: places)
        }
        let size = abs(value)
        if size >= 1_000_000 { return Self.trimmed(value / 1_000_000) + "M" }
        if size >= 10_000 { return Self.trimmed(value / 1_000) + "k" }
        return ReportFormat.decimal(value, places: 0)
    }

    private static func trimmed(_ value: Double) -> String {
        let text = ReportFormat.decimal(value, places: 1)
        return text.hasSuffix(".0") ? String(text.dropLast(2)) : text
    }
}
