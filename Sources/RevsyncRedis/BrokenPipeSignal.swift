#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// hiredis writes with plain `write(2)`; on a socket the server has closed, Linux then
/// raises SIGPIPE, whose default action kills the whole process. NIO avoids it per call
/// with MSG_NOSIGNAL, which hiredis does not use. Blocking the signal on the thread doing
/// the write turns it into the EPIPE error hiredis already handles, without changing
/// the signal disposition for the rest of the process (as `signal(SIGPIPE, SIG_IGN)` would).
/// A SIGPIPE raised by a write is delivered to the writing thread, so a per-thread mask suffices.
enum BrokenPipeSignal {
    /// Blocks SIGPIPE on the calling thread. Cheap and idempotent, so it runs in every
    /// work item rather than relying on hooks into the thread pool's thread start.
    static func blockOnCurrentThread() {
        #if canImport(Glibc) || canImport(Musl)
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        #endif
        // Darwin: each socket carries SO_NOSIGPIPE instead (see RedisConnection.init).
    }
}
