import Foundation
import RevsyncTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to a loopback port, for sending HTTP byte by byte as a slow or
/// hostile client would, and seeing when the server closes it.
final class RawConnection {
    private let socketFD: Int32

    /// - Parameter receiveBuffer: a small kernel receive buffer makes a reader that does not
    ///   read hold the server up after that many bytes, not after megabytes.
    init(port: Int, receiveBuffer: Int? = nil) throws {
        socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketFD >= 0 else { throw TestSetupError("socket() failed") }
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(socketFD, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        // On failure deinit closes the socket (it runs for a class whose stored properties are all
        // set): closing it here too could close a descriptor another thread has opened since.
        guard connected == 0 else { throw TestSetupError("connect() to 127.0.0.1:\(port) failed") }
    }

    deinit { close(socketFD) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(socketFD, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Closes the sending side (FIN), as a client does that goes away in the middle of a request.
    func stopSending() {
        shutdown(socketFD, Int32(SHUT_WR))
    }

    /// Reads bytes until `done` says so of everything read, the server closes the connection,
    /// or `timeout` passes; polls like `readUntilClosed`.
    func readBytes(timeout: Duration, until done: ([UInt8]) -> Bool) async -> [UInt8] {
        var received: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while ContinuousClock.now < deadline, !done(received) {
            var descriptor = pollfd(fd: socketFD, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 0) > 0 else {
                try? await Task.sleep(for: .milliseconds(5))
                continue
            }
            let count = recv(socketFD, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return received
    }

    /// Reads until the server closes the connection, `marker` arrives, or `timeout` passes; returns
    /// what arrived and whether the connection was closed. It never blocks a thread: it polls
    /// without waiting and sleeps between polls, so the server under test keeps its threads.
    func readUntilClosed(timeout: Duration, orUntil marker: String? = nil) async -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            var descriptor = pollfd(fd: socketFD, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 0) > 0 else {
                try? await Task.sleep(for: .milliseconds(10))
                continue
            }
            let count = recv(socketFD, &buffer, buffer.count, 0)
            if count <= 0 { return (String(decoding: received, as: UTF8.self), true) }
            received += buffer[0..<count]
            if let marker, String(decoding: received, as: UTF8.self).contains(marker) { return (String(decoding: received, as: UTF8.self), false) }
        }
        return (String(decoding: received, as: UTF8.self), false)
    }
}
