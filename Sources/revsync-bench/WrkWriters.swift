/// The writes of `Bench` driven by wrk instead of the bench's own client: each wrk thread
/// keeps one connection and is one device, with its own token and seq, sending one note a
/// request and advancing its `maxRevision` from each answer, as the in-process writers do.
///
/// wrk is C and runs in its own process, so the server shares the two cores with a cheaper
/// client than AsyncHTTPClient in its own process: the two tables side by side show how much
/// of the writes' figure is the client's.
enum WrkWriters {
    /// The Lua for `tokens.count` threads, each taking one token; `start` is the head when they begin.
    static func script(tokens: [String], start: Int64) -> String {
        // Tokens are the server's own URL-safe strings; quoted for Lua all the same.
        let list = tokens.map { "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }
        return """
            local tokens = { \(list.joined(separator: ", ")) }
            local handed = 0
            -- Every thread, for `Wrk.summary` to add up their `unread` answers.
            threads = {}

            -- In the main state, once per thread before it starts: its device.
            function setup(thread)
              handed = handed + 1
              thread:set("token", tokens[handed])
              table.insert(threads, thread)
            end

            -- In each thread's own state from here on: the seq answered last, and the answers
            -- whose maxRevision could not be read (any makes the run invalid: each later answer
            -- would carry everything since the start, and the figure would be of that).
            answered = 0
            known = \(start)
            unread = 0

            -- The next seq, built again until it is answered: wrk calls request() once more
            -- than it sends, in the first thread, to check the request it makes.
            function request()
              local seq = answered + 1
              local body = string.format(
                '{"maxRevision":%d,"changeSets":[{"seq":%d,"types":["notes"],"notes":{"create":[%d],' ..
                '"attributes":{"%d":{"body":"bench note %d","pinned":false}}}}]}', known, seq, -seq, -seq, seq)
              return wrk.format("POST", "/sync", { ["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json" }, body)
            end

            -- The server writes maxRevision after the change sets, followed only by `more` and the
            -- history id (a uuid): the answer's last 128 bytes hold it. Any other status makes the
            -- run invalid (`Wrk.parse`).
            function response(status, headers, body)
              if status ~= 200 then return end
              answered = answered + 1
              local revision = string.match(string.sub(body, -128), '.*"maxRevision":(%d+)')
              if revision then known = tonumber(revision) else unread = unread + 1 end
            end

            """ + Wrk.summary
    }
}
