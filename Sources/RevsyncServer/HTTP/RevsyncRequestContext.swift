import Hummingbird
import NIOCore

/// Hummingbird's basic request context, plus the connection's channel: a waiting `/sync`
/// request ends when its client closes the connection, instead of holding its place
/// until the wait runs out.
struct RevsyncRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel
    /// How a `/sync` request its connection holds is counted (`HeldRequestRecord`).
    let held = HeldRequestRecord()

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
