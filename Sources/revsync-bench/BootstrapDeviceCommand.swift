import ArgumentParser
import Foundation

/// `revsync-bench bootstrap-device`: one new device's bootstrap, run by the snapshot bench in a
/// process of its own (see ``DeviceBootstrapProcess``). Prints its figures as one JSON line.
struct BootstrapDeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bootstrap-device",
        abstract: "Bootstrap one new device from a server and print the figures as one JSON line (run by --snapshot).",
        shouldDisplay: false)

    @Option(help: "The server's base URL, e.g. http://127.0.0.1:8080.") var url: String
    @Option(help: "The device's token.") var token: String
    @Option(help: "Which snapshot the engine loads: json, or sqlite (the SQLite snapshot file).") var mode: DeviceBootstrap.Mode
    @Option(help: "The device's SQLite file, which must not exist yet.") var path: String

    func run() async throws {
        let result = try await DeviceBootstrap(url: url, token: token, mode: mode, path: path).run()
        print(String(decoding: try JSONEncoder().encode(result), as: UTF8.self))
    }
}

extension DeviceBootstrap.Mode: ExpressibleByArgument {}
