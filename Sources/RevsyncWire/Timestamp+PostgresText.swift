extension Timestamp {
    /// The canonical form of a timestamp PostgreSQL wrote as text in UTC (`(column AT TIME ZONE
    /// 'UTC')::text`: `YYYY-MM-DD HH:MM:SS[.ffffff]`, trailing zeros of the fraction dropped),
    /// which is that text with `+00` after it. The snapshots read every stored timestamp this
    /// way, and parsing each one to write it again took a quarter of the CPU of decoding their
    /// rows; the text is only checked (its shape, and a real date and time in the valid years),
    /// and anything else (another `DateStyle`, a year past 9999) is parsed as before: the
    /// answer is always `canonical(text + "+00")`, or the text itself where that is nil.
    public static func canonical(postgresUTC text: String) -> String {
        if isCanonicalPostgresUTC(text) { return text + "+00" }
        return canonical(text + "+00") ?? text
    }

    private static func isCanonicalPostgresUTC(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            // `YYYY-MM-DD HH:MM:SS`, then nothing or `.` and 1 to 6 digits, the last not 0.
            guard bytes.count == 19 || (21...26).contains(bytes.count),
                bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: " "),
                bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":")
            else { return false }
            func number(_ range: Range<Int>) -> Int? {
                var value = 0
                for index in range {
                    let byte = bytes[index]
                    guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                    value = value * 10 + Int(byte - UInt8(ascii: "0"))
                }
                return value
            }
            guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
                let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
                validYears.contains(year), (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
                hour < 24, minute < 60, second < 60
            else { return false }
            guard bytes.count > 19 else { return true }
            return bytes[19] == UInt8(ascii: ".") && number(20..<bytes.count) != nil && bytes[bytes.count - 1] != UInt8(ascii: "0")
        }
    }
}
