import Foundation

/// A JSON snapshot written to its spool file, removed when the last reference goes.
///
/// The answer's body removes the file once sent, but a body may never run: Hummingbird
/// writes the response's head first, and when the client has gone by then the write throws
/// and the body is dropped unread. Every client that gave up during a large snapshot's
/// spooling would leave a whole copy of the dataset behind until the instance stopped. Held
/// by the body, the file goes with it, sent or not.
final class SpooledSnapshot: Sendable {
    let path: String
    let size: Int

    init(path: String, size: Int) {
        self.path = path
        self.size = size
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
