/// How the instances answered while PostgreSQL was frozen: every process stopped (SIGSTOP), as
/// when its storage stalls or its VM is paused. Its kernel goes on, so connections stay open
/// and keep-alive is answered; PostgreSQL's own timeouts cannot run.
///
/// Right after the freeze the soak asks each instance `GET /ready` a few times, a second apart.
/// A probe that was lent an idle connection sends its `SELECT 1` into the frozen PostgreSQL;
/// one that found every connection busy waits for one. Both must be answered (503) while the
/// freeze lasts: the first once the server gives the connection up (three times
/// `REVSYNC_DB_TIMEOUT_SECONDS`, 30 s by default), the second once its wait for a connection
/// ends (the timeout). Before the server watched a request's work on its connection, the
/// first kind waited for as long as the freeze lasted.
public struct FrozenPostgres: Sendable, Equatable {
    /// One probe: the instance asked, when (seconds after the freeze), and its answer.
    public struct Probe: Sendable, Equatable {
        public var instance: Int
        public var sentAfter: Double
        public var answer: ReadinessAnswer

        public init(instance: Int, sentAfter: Double, answer: ReadinessAnswer) {
            self.instance = instance
            self.sentAfter = sentAfter
            self.answer = answer
        }

        /// Seconds from the freeze to its answer (or to giving up on one).
        public var answeredAfter: Double { sentAfter + answer.seconds }
    }

    /// Seconds PostgreSQL stayed frozen.
    public var frozenFor: Double
    public var probes: [Probe]

    public init(frozenFor: Double, probes: [Probe]) {
        self.frozenFor = frozenFor
        self.probes = probes
    }

    /// The probes with no answer while PostgreSQL was still frozen.
    public var unanswered: [Probe] { probes.filter { $0.answer.status == nil || $0.answeredAfter >= frozenFor } }

    /// How long PostgreSQL stays frozen: the servers' answer limit at the default timeout (30 s),
    /// the probes' second, and a margin for a busy machine.
    public static let span: Duration = .seconds(35)
    /// Probes of each instance, a second apart, from the freeze on.
    public static let probesPerInstance = 2
}
