import Foundation

/// Loopback TCP connections whose path dies without a word, for good: their packets are
/// dropped both ways by an nftables table of their own, so that neither end hears anything,
/// not even an acknowledgement, while new connections pass. It is what a NAT or a firewall
/// that forgot the connections does, or a failover that moved an address: unlike
/// `TCPRelay`'s cuts, which a userland relay makes, the kernels see it too, so TCP's own
/// keep-alive and user timeout are what it tests.
///
/// Needs root, `nft` (Debian's nftables) and `ss` (iproute2); Scripts/setup installs both.
public struct SilentFlows: Sendable {
    /// The nftables table (family `inet`) that drops them; `remove()` deletes it.
    public let table: String
    /// The server's port and the connections' local ports on the client's side.
    public let port: Int
    public let clientPorts: [Int]

    /// Whether this process can make connections silent: `nft` may read the ruleset (root)
    /// and `ss` runs. Throws what failed.
    public static func check() async throws {
        _ = try await runProgram(["nft", "list", "tables"])
        _ = try await runProgram(["ss", "-V"])
    }

    /// Drops every packet between `port` and each of `clientPorts` on this machine, from now on.
    public static func drop(port: Int, clientPorts: [Int], table: String) async throws -> SilentFlows {
        guard !clientPorts.isEmpty else { throw ProgramFailure(description: "no connection to port \(port) to make silent") }
        let ports = clientPorts.map(String.init).joined(separator: ", ")
        // Added, deleted and made again: a table of that name left by a run that was killed goes first.
        let rules = """
            add table inet \(table)
            delete table inet \(table)
            table inet \(table) {
              chain output {
                type filter hook output priority 0; policy accept;
                tcp dport \(port) tcp sport { \(ports) } drop
                tcp sport \(port) tcp dport { \(ports) } drop
              }
            }
            """
        do {
            _ = try await runProgram(["nft", "-f", "-"], input: Data(rules.utf8))
        } catch {
            throw ProgramFailure(description: "could not drop packets with nftables (root and the nftables package are needed; Scripts/setup installs it): \(error)")
        }
        return SilentFlows(table: table, port: port, clientPorts: clientPorts)
    }

    /// Lets the packets pass again (the connections' ends may have given up by then).
    public func remove() async throws {
        _ = try await runProgram(["nft", "delete", "table", "inet", table])
    }

    /// Which of the silenced connections are still established at the client's end.
    public func stillOpen() async throws -> Set<Int> {
        Set(try await Self.clientPorts(to: port)).intersection(clientPorts)
    }

    /// The local ports of this machine's established connections to `port`, of process
    /// `process` only when given.
    public static func clientPorts(to port: Int, process: Int32? = nil) async throws -> [Int] {
        let output = try await runProgram(["ss", "-Htnp", "state", "established", "dport = :\(port)"])
        // Recv-Q, Send-Q, local address:port, peer address:port, users:(("name",pid=N,fd=M)).
        return String(decoding: output, as: UTF8.self).split(separator: "\n").compactMap { line in
            let fields = line.split(whereSeparator: \.isWhitespace)
            guard fields.count >= 3, let colon = fields[2].lastIndex(of: ":") else { return nil }
            if let process, !line.contains("pid=\(process),") { return nil }
            return Int(fields[2][fields[2].index(after: colon)...])
        }
    }
}
