import RevsyncHarness
import RevsyncRedis
import RevsyncTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Calls while Redis cannot be reached fail quickly, naming the server.
@Suite struct RedisClientUnreachableTests {
    @Test func nothingListeningFailsFastWithTheEndpoint() async throws {
        let port = try FreePort.kernelChosenPort()
        try await RedisClient.withClient(configuration: RedisConfiguration(host: "127.0.0.1", port: port)) { client in
            for _ in 0..<3 {
                let took = await elapsed {
                    await #expect {
                        try await client.get("k")
                    } throws: { error in
                        guard let error = error as? RedisError, case .connectionFailed = error else { return false }
                        return error.isUnavailable && "\(error)".contains("127.0.0.1:\(port)")
                    }
                }
                // Alone it takes milliseconds; the bound is only against hanging, with room for
                // the whole suite's load (3.5 s once on a slower machine).
                #expect(took < .seconds(10), "a refused connect must fail fast, not hang")
            }
        }
    }

    @Test func unresponsiveServerFailsWithinTheConnectTimeout() async throws {
        let listener = try UnresponsiveListener()
        defer { listener.close() }
        var configuration = RedisConfiguration(host: "127.0.0.1", port: listener.port)
        // A connect attempt to this listener takes the full timeout; a replayed failure takes
        // milliseconds. Three seconds apart keeps the two distinguishable on a machine loaded by
        // every suite at once (a replay once took 0.91 s there, against a 1 s timeout).
        configuration.connectTimeout = .seconds(3)
        configuration.connectRetryDelay = .seconds(10)
        try await RedisClient.withClient(configuration: configuration) { client in
            let first = await elapsed {
                await #expect {
                    try await client.ping()
                } throws: { error in
                    guard case .connectionFailed(let endpoint, let reason) = error as? RedisError else { return false }
                    return endpoint == "127.0.0.1:\(listener.port)" && reason.contains("timed out")
                }
            }
            #expect(first >= .milliseconds(2_900) && first < .seconds(10), "took \(first)")
            // Within the retry delay the failure is replayed instead of waiting again.
            let second = await elapsed {
                await #expect(throws: RedisError.self) { try await client.ping() }
            }
            #expect(second < .milliseconds(2_500), "took \(second): a new connect attempt instead of the remembered failure")
        }
    }
}

/// A loopback port whose connects hang: it listens with a backlog of 0 and never accepts,
/// and a few half-open connects fill that queue, so the kernel drops further SYNs
/// the way a firewalled or frozen host would.
struct UnresponsiveListener {
    let port: Int
    private let sockets: [Int32]

    init() throws {
        #if canImport(Glibc)
        let streamType = Int32(SOCK_STREAM.rawValue)
        #else
        let streamType = SOCK_STREAM
        #endif
        port = try FreePort.kernelChosenPort()
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        func withAddress<T>(_ body: (UnsafePointer<sockaddr>) -> T) -> T {
            withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
        }

        let listener = socket(AF_INET, streamType, 0)
        guard listener >= 0, withAddress({ bind(listener, $0, length) }) == 0, listen(listener, 0) == 0 else {
            throw TestSetupError("cannot set up a listener on port \(port): errno \(errno)")
        }
        var sockets = [listener]
        for _ in 0..<3 {
            let filler = socket(AF_INET, streamType, 0)
            let flags = fcntl(filler, F_GETFL)
            _ = fcntl(filler, F_SETFL, flags | O_NONBLOCK)
            _ = withAddress { connect(filler, $0, length) }
            sockets.append(filler)
        }
        self.sockets = sockets
    }

    func close() {
        #if canImport(Glibc)
        sockets.forEach { _ = Glibc.close($0) }
        #elseif canImport(Darwin)
        sockets.forEach { _ = Darwin.close($0) }
        #endif
    }
}
