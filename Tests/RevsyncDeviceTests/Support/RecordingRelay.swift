#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// A TCP relay on a loopback port in front of a real server: it forwards bytes
/// both ways unchanged and keeps a copy, so a test can see the HTTP headers the
/// transport and the server actually exchanged (e.g. `Content-Encoding: gzip`).
final class RecordingRelay: Sendable {
    let port: Int
    private let upstreamPort: Int
    private let listener: Int32
    private let sent = Mutex<[UInt8]>([])
    private let answered = Mutex<[UInt8]>([])

    /// Everything clients sent to the server, connections concatenated.
    var clientBytes: [UInt8] { sent.withLock { $0 } }
    /// Everything the server sent back.
    var serverBytes: [UInt8] { answered.withLock { $0 } }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in self.acceptLoop() }.start()
    }

    /// Stops accepting; open connections end when either side closes them.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// Whether `bytes` contain `text`, compared case-insensitively (for header lines).
    static func contains(_ bytes: [UInt8], _ text: String) -> Bool {
        let needle = Array(text.lowercased().utf8)
        let haystack = bytes.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        guard needle.count <= haystack.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: upstreamPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(server)
                close(client)
                continue
            }
            // Each direction pumps until its source closes; the second to finish closes both sockets.
            let finished = PumpCounter()
            let pump: @Sendable (Int32, Int32, Bool) -> Void = { [self] from, to, fromClient in
                var chunk = [UInt8](repeating: 0, count: 65536)
                while true {
                    let count = chunk.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
                    guard count > 0 else { break }
                    if fromClient {
                        sent.withLock { $0 += chunk[0..<count] }
                    } else {
                        answered.withLock { $0 += chunk[0..<count] }
                    }
                    var written = 0
                    while written < count {
                        let n = chunk[written..<count].withUnsafeBytes { send(to, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        guard n > 0 else { break }
                        written += n
                    }
                    if written < count { break }
                }
                shutdown(to, Int32(SHUT_WR))
                shutdown(from, Int32(SHUT_RD))
                if finished.increment() == 2 {
                    close(client)
                    close(server)
                }
            }
            Thread { pump(client, server, true) }.start()
            Thread { pump(server, client, false) }.start()
        }
    }
}

/// How many of a connection's two pumps have finished.
private final class PumpCounter: Sendable {
    private let count = Mutex(0)

    func increment() -> Int {
        count.withLock { count in
            count += 1
            return count
        }
    }
}
