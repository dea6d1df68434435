import Foundation
import RevsyncTestSupport
import Synchronization
import Testing

/// A live server stopped while connections keep arriving. Cancelled instead of shut down
/// gracefully, a server trapped here within a few rounds ("Deinited NIOAsyncWriter without
/// calling finish()": a connection accepted but not yet served was dropped), which took down
/// a whole CI run; a trap ends the test process, so a regression cannot pass unseen.
@Suite struct LiveServerShutdownTests {
    @Test func stoppingWhileConnectionsArriveDoesNotTrap() async throws {
        for _ in 0..<15 {
            let done = DoneFlag()
            try await withLiveServer { live in
                let port = try #require(live.baseURL.port)
                // A thread of its own: connecting blocks, and it must go on while the server stops.
                Thread {
                    var open: [RawConnection] = []
                    while !done.isSet {
                        if let connection = try? RawConnection(port: port) {
                            connection.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                            open.append(connection)
                        }
                        if open.count > 200 { open.removeFirst(100) }
                    }
                }.start()
                try await Task.sleep(for: .milliseconds(100))
            }
            done.set()
        }
    }
}

private final class DoneFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}
