import Foundation
import Testing

@testable import RevsyncWire

@Suite struct TimestampTests {
    @Test(arguments: [
        // PostgreSQL's text form with an hour offset (the contract's example).
        ("2014-02-01 13:15:23.487+01", "2014-02-01 12:15:23.487+00"),
        // ISO 8601 with Z, T separator.
        ("2014-02-01T12:15:23Z", "2014-02-01 12:15:23+00"),
        ("2014-02-01t12:15:23z", "2014-02-01 12:15:23+00"),
        // Offsets with minutes, with and without a colon, east and west.
        ("2024-06-01 12:00:00+05:30", "2024-06-01 06:30:00+00"),
        ("2024-06-01T12:00:00-0800", "2024-06-01 20:00:00+00"),
        ("2024-06-01T12:00:00.25-08:00", "2024-06-01 20:00:00.25+00"),
        ("2024-06-01 12:00:00 +02", "2024-06-01 10:00:00+00"),
        // No offset: UTC. No seconds: :00.
        ("2024-06-01 12:00:00", "2024-06-01 12:00:00+00"),
        ("2024-06-01T12:34", "2024-06-01 12:34:00+00"),
        // A date alone is midnight UTC, leap day included.
        ("2024-02-29", "2024-02-29 00:00:00+00"),
        ("2000-02-29", "2000-02-29 00:00:00+00"),
        // Fractions: trailing zeros trimmed, all-zero dropped, comma accepted.
        ("2014-02-01 12:15:23.500+00", "2014-02-01 12:15:23.5+00"),
        ("2014-02-01 12:15:23.000+00", "2014-02-01 12:15:23+00"),
        ("2014-02-01 12:15:23,125Z", "2014-02-01 12:15:23.125+00"),
        ("2014-02-01 12:15:23.000001Z", "2014-02-01 12:15:23.000001+00"),
        // More than six digits round to microseconds.
        ("2024-01-01 00:00:00.123456789Z", "2024-01-01 00:00:00.123457+00"),
        ("2024-01-01 00:00:00.1234564Z", "2024-01-01 00:00:00.123456+00"),
        // Rounding that carries into the next second, day and year.
        ("2024-12-31 23:59:59.9999996Z", "2025-01-01 00:00:00+00"),
        // Offsets that cross a day, a month and a year boundary.
        ("2024-01-01 00:30:00+01", "2023-12-31 23:30:00+00"),
        ("2023-12-31 23:30-02:00", "2024-01-01 01:30:00+00"),
        ("2024-03-01 00:15:00+00:30", "2024-02-29 23:45:00+00"),
        // Before 1970 and at the ends of the accepted range.
        ("1969-12-31 23:59:59.5+00", "1969-12-31 23:59:59.5+00"),
        ("0001-01-01 00:00:00+00", "0001-01-01 00:00:00+00"),
        ("9999-12-31 23:59:59.999999+00", "9999-12-31 23:59:59.999999+00"),
    ])
    func acceptedFormIsCanonicalizedToUTC(input: String, canonical: String) {
        #expect(Timestamp.canonical(input) == canonical)
    }

    @Test(arguments: [
        "2023-02-29",  // not a leap year
        "1900-02-29",  // century, not a leap year
        "2024-04-31",
        "2024-13-01",
        "2024-00-10",
        "2024-01-00",
        "2024-01-01 24:00",
        "2024-01-01T10:60:00",
        "2024-01-01T10:00:60",
        "abc",
        "",
        "2024-1-01",
        "2024-01-01T",
        "2024-01-01T10",
        "2024-01-01T10:00:00.",
        "2024-01-01T10:00:00.1234567890Z",  // ten fraction digits
        "2024-01-01T10:00:00Zjunk",
        "2024-01-01T10:00:00 ",
        "2024-01-01T10:00:00+1",
        "2024-01-01T10:00:00+01:",
        "2024-01-01T10:00:00+16",  // offsets stop at 15 hours
        "2024-01-01T10:00:00+05:60",
        "0000-06-01 00:00:00+00",  // year 0
        "0001-01-01 00:30:00+01",  // year 0 once the offset is applied
        "9999-12-31 23:30:00-01",  // year 10000 once the offset is applied
        "2024-01-01 10:00:00 UTC",
    ])
    func invalidTextIsRefused(input: String) {
        #expect(Timestamp(parsing: input) == nil)
        #expect(Timestamp.canonical(input) == nil)
    }

    @Test func largestOffsetIsAccepted() {
        #expect(Timestamp.canonical("2024-01-01 12:00:00+15:59") == "2023-12-31 20:01:00+00")
    }

    @Test func unixEpochIsZeroMicroseconds() throws {
        #expect(try #require(Timestamp(parsing: "1970-01-01T00:00:00Z")).microseconds == 0)
        #expect(try #require(Timestamp(parsing: "1970-01-01 01:00:00.000001+01")).microseconds == 1)
        #expect(try #require(Timestamp(parsing: "1969-12-31 23:59:59.999999Z")).microseconds == -1)
    }

    @Test func sameInstantInDifferentFormsIsEqual() throws {
        let forms = ["2014-02-01 13:15:23.487+01", "2014-02-01T12:15:23.487Z", "2014-02-01T07:15:23.487-0500"]
        let parsed = try forms.map { try #require(Timestamp(parsing: $0)) }
        #expect(Set(parsed).count == 1)
    }

    @Test func orderFollowsTheInstantNotTheText() throws {
        let earlier = try #require(Timestamp(parsing: "2024-01-01 10:00:00+02"))  // 08:00 UTC
        let later = try #require(Timestamp(parsing: "2024-01-01 09:00:00+00"))
        #expect(earlier < later)
    }

    @Test(arguments: [
        "2014-02-01 13:15:23.487+01", "1969-07-20T20:17:40Z", "2024-02-29", "0001-01-01 00:00:00.000001Z",
        "2100-03-01T00:00:00.5-11:30",
    ])
    func canonicalFormParsesBackToTheSameInstant(input: String) throws {
        let timestamp = try #require(Timestamp(parsing: input))
        let again = try #require(Timestamp(parsing: timestamp.canonical))
        #expect(again == timestamp)
        #expect(again.canonical == timestamp.canonical)
    }
}

/// `Timestamp.canonical(postgresUTC:)` must give exactly what parsing gave: `canonical(text +
/// "+00")`, or the text where that is nil.
@Suite struct PostgresTextTimestampTests {
    private func parsed(_ text: String) -> String { Timestamp.canonical(text + "+00") ?? text }

    @Test(arguments: [
        "2014-02-01 12:15:23", "2014-02-01 12:15:23.487", "2014-02-01 12:15:23.000001", "2014-02-01 12:15:23.5",
        "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999", "2024-02-29 00:00:00", "2000-02-29 12:00:00.1",
        // Not what PostgreSQL writes in UTC with the ISO DateStyle: parsed as before.
        "2014-02-01 12:15:23.480", "2014-02-01 12:15:23.", "2014-02-01 12:15:23.1234567", "2023-02-29 00:00:00",
        "1900-02-29 00:00:00", "2014-13-01 00:00:00", "2014-02-01 24:00:00", "2014-02-01 12:60:00",
        "2014-02-01 12:15:60", "0000-01-01 00:00:00", "10000-01-01 00:00:00", "2014-02-01T12:15:23",
        "2014-02-01 12:15", "2014-02-01", "02/01/2014 12:15:23", "Sat Feb 01 12:15:23 2014",
        "0044-03-15 12:00:00 BC", "2014-02-01 12:15:23.4a", "2014-02-01 12:15:2x", "", "infinity",
    ])
    func givesWhatParsingGave(text: String) {
        #expect(Timestamp.canonical(postgresUTC: text) == parsed(text))
    }

    @Test func givesWhatParsingGaveOnRandomInstants() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let instant = Timestamp(microseconds: Int64.random(in: -62_135_596_800_000_000...253_402_300_799_999_999, using: &random))
            // The canonical text without its offset is what PostgreSQL writes for it in UTC.
            let text = String(instant.canonical.dropLast(3))
            #expect(Timestamp.canonical(postgresUTC: text) == parsed(text), "\(text)")
            #expect(Timestamp.canonical(postgresUTC: text) == instant.canonical)
        }
    }
}
