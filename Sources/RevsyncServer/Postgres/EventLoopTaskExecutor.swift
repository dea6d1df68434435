import NIOCore

/// Runs a task's jobs on one event loop: a write transaction's awaits on its connection then
/// resume on the loop that read the answer, not on a thread of the concurrency pool woken
/// for it.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
