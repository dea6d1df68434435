import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Loopback ports for servers that the simulator, the bench and the tests start.
public enum FreePort {
    /// `count` distinct ports that nothing listens on right now.
    ///
    /// Picked below the kernel's ephemeral range when it can: a killed server's port is free
    /// until the restart binds it again, and in a soak thousands of outgoing connections
    /// could otherwise take it as their source port in that window.
    public static func loopback(count: Int) throws -> [Int] {
        var ports: [Int] = []
        var generator = SystemRandomNumberGenerator()
        let (ephemeralLow, _) = ephemeralRange()
        let quiet = 10_000..<Swift.max(10_001, ephemeralLow)
        var attempts = 0
        while ports.count < count, attempts < 2_000 {
            attempts += 1
            let candidate = Int.random(in: quiet, using: &generator)
            if !ports.contains(candidate), canBind(candidate) { ports.append(candidate) }
        }
        while ports.count < count {
            let port = try kernelChosenPort()
            if !ports.contains(port) { ports.append(port) }
        }
        return ports
    }

    /// Whether a loopback TCP socket can bind `port` now.
    public static func canBind(_ port: Int) -> Bool {
        (try? bindLoopback(port: port)) != nil
    }

    /// A port nobody listens on right now, which the kernel picks from its ephemeral range
    /// (bind to 0 and ask which).
    public static func kernelChosenPort() throws -> Int {
        try bindLoopback(port: 0)
    }

    /// `net.ipv4.ip_local_port_range`, or Linux's default when it cannot be read.
    static func ephemeralRange() -> (Int, Int) {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) else {
            return (32768, 60999)
        }
        let numbers = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        return numbers.count == 2 ? (numbers[0], numbers[1]) : (32768, 60999)
    }

    /// Binds a loopback socket to `port` (0: any), closes it and returns the bound port.
    private static func bindLoopback(port: Int) throws -> Int {
        #if canImport(Glibc)
        let streamType = Int32(SOCK_STREAM.rawValue)
        #else
        let streamType = SOCK_STREAM
        #endif
        let socketFD = socket(AF_INET, streamType, 0)
        guard socketFD >= 0 else { throw FreePortError("socket() failed: errno \(errno)") }
        defer { close(socketFD) }
        // Like the server's own listener, so a port in TIME_WAIT counts as free.
        var reuse: Int32 = 1
        _ = setsockopt(socketFD, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(socketFD, socketAddress, length) == 0 && getsockname(socketFD, socketAddress, &length) == 0
            }
        }
        guard bound else { throw FreePortError("cannot bind 127.0.0.1:\(port): errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// No loopback socket could be made or bound; the message says which call failed.
public struct FreePortError: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
