import NIOCore
import Synchronization

/// Counts answers as their futures complete, on the event loops, so the bench can wait for
/// thousands of them with a deadline and notice one that arrives too early, without a task each.
final class AnswerTally: Sendable {
    private struct State {
        var answered = 0
        /// The first failure, described.
        var problem: String?
        /// The first answer, described (status and the start of its body).
        var first: String?
    }

    private let state = Mutex(State())

    init(_ futures: [EventLoopFuture<PollAnswer>]) {
        count = futures.count
        for future in futures {
            future.whenComplete { [self] result in
                state.withLock { state in
                    state.answered += 1
                    switch result {
                    case .failure(let error): if state.problem == nil { state.problem = "\(error)" }
                    case .success(let answer):
                        if state.first == nil { state.first = "\(answer.status.code) \(String(buffer: answer.body).prefix(300))" }
                    }
                }
            }
        }
    }

    var answered: Int { state.withLock { $0.answered } }
    var problem: String? { state.withLock { $0.problem } }
    var first: String? { state.withLock { $0.first } }
    let count: Int

    /// Throws when any request was answered: before a commit, a waiting request must not be.
    func checkNoneAnswered() throws {
        let (answered, first, problem) = state.withLock { ($0.answered, $0.first, $0.problem) }
        guard answered == 0 else {
            throw BenchError(
                "\(answered) of \(count) waiting requests were answered before any commit, the first with "
                    + "\(first ?? problem ?? "?"): does the server hold waiting requests (issue 12)?")
        }
    }

    /// The answers of `futures`, in their order, once all have arrived; throws when one failed or
    /// when they have not all arrived within `timeout`. `arrived` runs as soon as the bench sees
    /// the last one arrive (within 2 ms), before the answers are collected: collecting 10,000
    /// takes the bench tens of milliseconds of CPU that are no part of their arrival.
    static func all(
        _ futures: [EventLoopFuture<PollAnswer>], within timeout: Duration, what: String, arrived: () throws -> Void = {}
    ) async throws -> [PollAnswer] {
        let tally = AnswerTally(futures)
        let deadline = ContinuousClock.now + timeout
        while tally.answered < futures.count {
            if let problem = tally.problem { throw BenchError("\(what): \(problem)") }
            guard ContinuousClock.now < deadline else {
                throw BenchError("\(what): \(tally.answered) of \(futures.count) answered within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        try arrived()
        if let problem = tally.problem { throw BenchError("\(what): \(problem)") }
        var answers: [PollAnswer] = []
        answers.reserveCapacity(futures.count)
        for future in futures { answers.append(try await future.get()) }
        return answers
    }
}
