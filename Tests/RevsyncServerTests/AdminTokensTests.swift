import Testing

@testable import RevsyncServer

/// How admin tokens are read from `REVSYNC_ADMIN_TOKEN` and its file, by the server and by
/// `revsync devices` alike.
@Suite struct AdminTokensTests {
    @Test func readsAFileWrittenWithCRLFAsOneWrittenWithLF() {
        let lf = "# rotated on Monday\n first-token \n\nsecond-token\n"
        let crlf = "# rotated on Monday\r\n first-token \r\n\r\nsecond-token\r\n"
        #expect(AdminTokens.parse(lf, separator: "\n") == ["first-token", "second-token"])
        #expect(AdminTokens.parse(crlf, separator: "\n") == ["first-token", "second-token"])
    }

    @Test func readsTheVariableCommaSeparated() {
        #expect(AdminTokens.parse(" one, two ,,#three", separator: ",") == ["one", "two"])
        #expect(AdminTokens.parse("", separator: ",").isEmpty)
    }
}
