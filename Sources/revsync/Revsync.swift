import Foundation
import ArgumentParser
import Logging
import RevsyncHarness
import RevsyncServer

@main
struct Revsync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revsync",
        abstract: "The Revsync sync server.",
        subcommands: [Serve.self, Migrate.self, Devices.self, Restored.self],
        defaultSubcommand: Serve.self)
}

/// Options shared by the commands; each falls back to its REVSYNC_* variable, then to the default.
struct CommonOptions: ParsableArguments {
    @Option(help: "PostgreSQL URL (env REVSYNC_DATABASE_URL).")
    var databaseURL: String?

    @Option(help: "Dataset schema file (env REVSYNC_SCHEMA, default Config/schema.json).")
    var schema: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (env REVSYNC_LOG_LEVEL).")
    var logLevel: String?

    func settings() throws -> ServerSettings {
        var settings = try ServerSettings.fromEnvironment()
        if let databaseURL { settings.databaseURL = databaseURL }
        if let schema { settings.schemaPath = schema }
        return settings
    }

    func logger(_ label: String) throws -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = try logLevel.map { try Logger.Level(setting: $0, named: "--log-level") }
            ?? Logger.Level(setting: ProcessInfo.processInfo.environment["REVSYNC_LOG_LEVEL"], named: "REVSYNC_LOG_LEVEL")
        return logger
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Migrate the database, then serve /sync until interrupted.")

    @OptionGroup var common: CommonOptions

    @Option(help: "Address to listen on, host:port (env REVSYNC_LISTEN, default 127.0.0.1:8080).")
    var listen: String?

    func run() async throws {
        var settings = try common.settings()
        if let listen { try settings.setListen(listen) }
        let logger = try common.logger("revsync")
        if settings.adminToken == nil && settings.adminTokenFile == nil {
            logger.warning("neither REVSYNC_ADMIN_TOKEN nor REVSYNC_ADMIN_TOKEN_FILE is set: the device endpoints are disabled")
        }
        let server = try Server(settings: settings, logger: logger)
        logger.info("serving", metadata: ["address": "\(settings.host):\(settings.port)", "schema": "\(settings.schemaPath)"])
        try await server.buildApplication().runService()
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Bring the database up to date with the server and the dataset schema, then exit.")

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let logger = try common.logger("revsync.migrate")
        let server = try Server(settings: try common.settings(), logger: logger)
        let steps = try await withRunning(server.postgresService) { try await server.migrator.migrate() }
        print(steps.isEmpty ? "already up to date" : steps.joined(separator: "\n"))
    }
}

struct Restored: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Say the database went back (restored from a backup, or failed over with commits lost): every device loads a new snapshot.",
        discussion: """
            Renews the database's history id. Devices that hold the old one are refused (409 history_changed) and \
            load a new snapshot, keeping their pending changes, instead of catching up over revisions the database \
            no longer has and will number again. Running instances learn it within REVSYNC_HISTORY_CHECK_MS. \
            Instances also renew it themselves when they see the database went back; run this after every restore \
            all the same, since an instance that started after the restore with Redis emptied cannot see it.
            """)

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let logger = try common.logger("revsync.restored")
        let server = try Server(settings: try common.settings(), logger: logger)
        let (old, new, head) = try await withRunning(server.postgresService) {
            // A backup from an older version lacks later migrations (`history_since` among them):
            // brought up to date first, as `serve` would at start.
            for step in try await server.migrator.migrate() { print("migrated: \(step)") }
            let store = PostgresHistory(database: server.database)
            let (head, old, _) = try await store.read()
            return (old, try await store.renew(from: old).id, head)
        }
        print("history \(old) renewed as \(new) at revision \(head): devices holding the old one load a new snapshot")
    }
}
