/// Timestamps as the contract carries them.
///
/// A device may send ISO 8601 (`2014-02-01T13:15:23.487+01:00`, `…Z`) or
/// PostgreSQL's text form (`2014-02-01 13:15:23.487+01`); a value without an
/// offset is taken as UTC, a date alone as midnight UTC. The server returns one
/// canonical form: PostgreSQL's text form in UTC with microsecond precision and
/// trailing zeros trimmed, e.g. `2014-02-01 12:15:23.487+00`.
public struct Timestamp: Sendable, Hashable, Comparable {
    /// Microseconds since 1970-01-01 00:00:00 UTC.
    public var microseconds: Int64

    public init(microseconds: Int64) { self.microseconds = microseconds }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.microseconds < rhs.microseconds }

    /// Years outside this range are refused: PostgreSQL and most clients agree on them.
    public static let validYears = 1...9999

    /// Parses either accepted form; nil when the text is not a valid timestamp.
    public init?(parsing text: String) {
        var scanner = DigitScanner(Array(text.utf8))
        guard let year = scanner.number(digits: 4), scanner.skip("-"),
            let month = scanner.number(digits: 2), scanner.skip("-"),
            let day = scanner.number(digits: 2)
        else { return nil }
        var hour = 0, minute = 0, second = 0, micros: Int64 = 0, offsetSeconds = 0
        if !scanner.atEnd {
            guard scanner.skip("T") || scanner.skip("t") || scanner.skip(" "),
                let h = scanner.number(digits: 2), scanner.skip(":"), let m = scanner.number(digits: 2)
            else { return nil }
            hour = h
            minute = m
            if scanner.skip(":") {
                guard let s = scanner.number(digits: 2) else { return nil }
                second = s
                if scanner.skip(".") || scanner.skip(",") {
                    guard let fraction = scanner.fractionMicroseconds() else { return nil }
                    micros = fraction
                }
            }
            if !scanner.atEnd {
                guard let offset = scanner.utcOffsetSeconds() else { return nil }
                offsetSeconds = offset
            }
        }
        // The year is checked as written too: PostgreSQL refuses year 0 even when an offset would move it.
        guard scanner.atEnd, Self.validYears.contains(year), (1...12).contains(month), day >= 1, day <= Self.daysIn(month: month, year: year),
            hour < 24, minute < 60, second < 60
        else { return nil }
        let days = Self.daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetSeconds)
        self.microseconds = seconds * 1_000_000 + micros
        guard Self.validYears.contains(civil.year) else { return nil }
    }

    /// The canonical text: `YYYY-MM-DD HH:MM:SS[.ffffff]+00`.
    public var canonical: String {
        let parts = civil
        var text = "\(pad(parts.year, 4))-\(pad(parts.month, 2))-\(pad(parts.day, 2)) "
        text += "\(pad(parts.hour, 2)):\(pad(parts.minute, 2)):\(pad(parts.second, 2))"
        if parts.micros > 0 {
            var fraction = pad(Int(parts.micros), 6)
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text + "+00"
    }

    /// The canonical form of `text`, or nil when it is not a valid timestamp.
    public static func canonical(_ text: String) -> String? {
        Timestamp(parsing: text)?.canonical
    }

    private var civil: (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, micros: Int64) {
        let (secondsTotal, micros) = Self.floorDivide(microseconds, 1_000_000)
        let (days, secondOfDay) = Self.floorDivide(secondsTotal, 86_400)
        let (year, month, day) = Self.civilFromDays(Int(days))
        let s = Int(secondOfDay)
        return (year, month, day, s / 3600, (s % 3600) / 60, s % 60, micros)
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let q = a / b, r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    private func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    static func isLeap(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    // Howard Hinnant's days-from-civil and its inverse (proleptic Gregorian calendar).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// A cursor over ASCII bytes for the timestamp grammar.
private struct DigitScanner {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index == bytes.count }

    mutating func skip(_ character: Character) -> Bool {
        guard let ascii = character.asciiValue, index < bytes.count, bytes[index] == ascii else { return false }
        index += 1
        return true
    }

    mutating func number(digits: Int) -> Int? {
        guard index + digits <= bytes.count else { return nil }
        var value = 0
        for byte in bytes[index..<(index + digits)] {
            guard (48...57).contains(byte) else { return nil }
            value = value * 10 + Int(byte - 48)
        }
        index += digits
        return value
    }

    /// 1 to 9 fraction digits, rounded to microseconds.
    mutating func fractionMicroseconds() -> Int64? {
        var digits: [Int64] = []
        while index < bytes.count, (48...57).contains(bytes[index]) {
            digits.append(Int64(bytes[index] - 48))
            index += 1
        }
        guard (1...9).contains(digits.count) else { return nil }
        var micros: Int64 = 0
        for position in 0..<6 { micros = micros * 10 + (position < digits.count ? digits[position] : 0) }
        if digits.count > 6, digits[6] >= 5 { micros += 1 }
        return micros
    }

    /// `Z`, `±HH`, `±HH:MM` or `±HHMM`, optionally after one space.
    mutating func utcOffsetSeconds() -> Int? {
        _ = skip(" ")
        if skip("Z") || skip("z") { return 0 }
        let sign: Int
        if skip("+") { sign = 1 } else if skip("-") { sign = -1 } else { return nil }
        guard let hours = number(digits: 2), hours <= 15 else { return nil }
        var minutes = 0
        if skip(":") {
            guard let m = number(digits: 2) else { return nil }
            minutes = m
        } else if !atEnd {
            guard let m = number(digits: 2) else { return nil }
            minutes = m
        }
        guard minutes < 60 else { return nil }
        return sign * (hours * 3600 + minutes * 60)
    }
}
