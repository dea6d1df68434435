/// The server's own tables, as numbered migrations applied in order, once each.
enum CoreMigrations {
    struct Migration {
        let version: Int
        let name: String
        let statements: [String]
    }

    static let all: [Migration] = [
        Migration(version: 1, name: "revision log, devices, temporary ids, outcomes", statements: [
            // One row: the head revision and the retained log's horizon. Taking its
            // row lock is what orders commits into gap-free revisions.
            """
            CREATE TABLE revsync_head (
                singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                head bigint NOT NULL,
                horizon bigint NOT NULL
            )
            """,
            "INSERT INTO revsync_head (singleton, head, horizon) VALUES (true, 0, 0)",
            """
            CREATE TABLE revsync_devices (
                id bigserial PRIMARY KEY,
                public_id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
                name text NOT NULL,
                user_name text NOT NULL,
                role text NOT NULL,
                token_hash bytea NOT NULL UNIQUE,
                last_seq bigint NOT NULL DEFAULT 0,
                created_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            // body: the catch-up bytes for every device; author_body: the same with
            // seq and __oldId__, for the device that made the change set.
            """
            CREATE TABLE revsync_log (
                revision bigint PRIMARY KEY,
                device_id bigint NOT NULL REFERENCES revsync_devices (id),
                seq bigint,
                committed_at timestamptz NOT NULL DEFAULT now(),
                body text NOT NULL,
                author_body text NOT NULL
            )
            """,
            """
            CREATE TABLE revsync_temp_ids (
                device_id bigint NOT NULL REFERENCES revsync_devices (id),
                temp_id bigint NOT NULL,
                entity text NOT NULL,
                id bigint NOT NULL,
                PRIMARY KEY (device_id, temp_id)
            )
            """,
            // The outcome of every handled seq, so a retry repeats it: the revision it
            // became, or why it was rejected and what it was (for a fresh corrective set).
            """
            CREATE TABLE revsync_outcomes (
                device_id bigint NOT NULL REFERENCES revsync_devices (id),
                seq bigint NOT NULL,
                revision bigint,
                reason text,
                change_set text,
                PRIMARY KEY (device_id, seq)
            )
            """,
            """
            CREATE TABLE revsync_schema (
                version integer PRIMARY KEY,
                document text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """,
        ]),
        // Names this database in cache keys, so a cache never serves one database's log for another.
        Migration(version: 2, name: "database instance id", statements: [
            "ALTER TABLE revsync_head ADD COLUMN instance uuid NOT NULL DEFAULT gen_random_uuid()"
        ]),
        // Which seq created each temporary id, so an acknowledgement whose log entry was
        // pruned can be rebuilt for a device that asks again after re-bootstrapping.
        Migration(version: 3, name: "seq of temporary ids", statements: [
            "ALTER TABLE revsync_temp_ids ADD COLUMN seq bigint",
            "CREATE INDEX ON revsync_temp_ids (device_id, seq)",
        ]),
        // A seq names one change set forever: its content's digest is kept with its outcome,
        // so a different change set under a used seq is refused (`seq_reused`). Rejections
        // remember the head when they were made, so they are pruned with the log. Devices
        // can be revoked, and the server notes when it last saw each one.
        Migration(version: 4, name: "outcome digests, revocation, last seen", statements: [
            "ALTER TABLE revsync_outcomes ADD COLUMN digest bytea",
            "ALTER TABLE revsync_outcomes ADD COLUMN head_at bigint",
            "CREATE INDEX ON revsync_outcomes (head_at) WHERE revision IS NULL",
            "ALTER TABLE revsync_devices ADD COLUMN revoked_at timestamptz",
            "ALTER TABLE revsync_devices ADD COLUMN last_seen_at timestamptz",
        ]),
        // The horizon gets a row of its own: moving it must never wait for (or hold up) the
        // revision lock on the head row, which every commit takes.
        Migration(version: 5, name: "horizon apart from the head", statements: [
            """
            CREATE TABLE revsync_horizon (
                singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                horizon bigint NOT NULL
            )
            """,
            "INSERT INTO revsync_horizon (singleton, horizon) SELECT true, horizon FROM revsync_head",
            "ALTER TABLE revsync_head DROP COLUMN horizon",
        ]),
        // Names the line of revisions devices hold (`HistoryRules`): renewed when the database
        // is found to have gone back, so that devices holding revisions it no longer has (and
        // will number again) load a new snapshot instead of catching up past them.
        Migration(version: 6, name: "history id", statements: [
            "ALTER TABLE revsync_head ADD COLUMN history uuid NOT NULL DEFAULT gen_random_uuid()"
        ]),
        // When the history id was set (NULL: before this column, older than any set since). An
        // instance that finds another id than it holds tells a renewal made after its own (to
        // adopt) from an older id a restore brought back (to renew again: devices may still hold
        // revisions of that old line past the backup's head).
        Migration(version: 7, name: "history id's time", statements: [
            "ALTER TABLE revsync_head ADD COLUMN history_since timestamptz"
        ]),
        // Counts the changes to devices' tokens, roles and revocations, raised by the statement
        // that makes each one. Every instance reads it with the head (`HeadReading`): a change
        // whose announcement on Redis was lost (the instance that made it could not reach
        // Redis) still empties the other instances' device caches within a reconcile interval.
        Migration(version: 8, name: "device changes counted", statements: [
            """
            CREATE TABLE revsync_device_changes (
                singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                version bigint NOT NULL DEFAULT 0
            )
            """,
            "INSERT INTO revsync_device_changes (singleton, version) VALUES (true, 0)",
        ]),
    ]
}
