import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import RevsyncServer
import RevsyncWire

/// `revsync devices …`: the admin endpoints for operators, against a running server.
struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, revoke, rotate or re-role devices of a running server (admin token).",
        subcommands: [List.self, Revoke.self, Rotate.self, Role.self])

    struct Options: ParsableArguments {
        @Option(help: "The server's base URL (env REVSYNC_URL, default http://127.0.0.1:8080).")
        var url: String?

        @Option(help: "A file holding the admin token (env REVSYNC_ADMIN_TOKEN_FILE; else env REVSYNC_ADMIN_TOKEN).")
        var adminTokenFile: String?

        /// The `REVSYNC_*` variables that are set: an empty one counts as unset, as for the server.
        private var environment: [String: String] { ProcessInfo.processInfo.environment.filter { !$0.value.isEmpty } }

        func baseURL() -> String {
            let text = url ?? environment["REVSYNC_URL"] ?? "http://127.0.0.1:8080"
            return text.hasSuffix("/") ? String(text.dropLast()) : text
        }

        /// The first token of the file, or of REVSYNC_ADMIN_TOKEN, read as the server reads them.
        func adminToken() throws -> String {
            let environment = self.environment
            if let path = adminTokenFile ?? environment["REVSYNC_ADMIN_TOKEN_FILE"] {
                guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                    throw ValidationError("cannot read the admin token file \(path)")
                }
                guard let token = AdminTokens.parse(text, separator: "\n").first else { throw ValidationError("\(path) holds no token") }
                return token
            }
            guard let token = AdminTokens.parse(environment["REVSYNC_ADMIN_TOKEN"] ?? "", separator: ",").first else {
                throw ValidationError("give the admin token with --admin-token-file or REVSYNC_ADMIN_TOKEN")
            }
            return token
        }

        /// Sends one admin request and returns the body of a 2xx answer; anything else throws the server's message.
        func send(_ method: HTTPMethod, _ path: String, body: String? = nil) async throws -> Data {
            let token = try adminToken()
            var request = HTTPClientRequest(url: baseURL() + path)
            request.method = method
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: body))
            }
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                let response = try await client.execute(request, timeout: .seconds(30))
                let bytes = try await response.body.collect(upTo: 64 * 1024 * 1024)
                try await client.shutdown()
                let data = Data(bytes.readableBytesView)
                guard (200..<300).contains(response.status.code) else {
                    let message = (try? JSONDecoder().decode(ErrorBody.self, from: data)).map { "\($0.error): \($0.message)" }
                    throw AdminRequestFailed(description: "\(method) \(path) answered \(response.status.code): \(message ?? String(decoding: data, as: UTF8.self))")
                }
                return data
            } catch {
                try? await client.shutdown()
                throw error
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every device, revoked ones included.")
        @OptionGroup var options: Options

        func run() async throws {
            let list = try JSONDecoder().decode(DeviceList.self, from: try await options.send(.GET, "/devices"))
            print(["device id", "name", "user", "role", "created", "last seen", "last seq", "revoked"].joined(separator: "\t"))
            for device in list.devices {
                print([device.deviceId, device.name, device.user, device.role, device.created, device.lastSeen ?? "-",
                       String(device.lastSeq), device.revoked ?? "-"].joined(separator: "\t"))
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a device: its token stops working on every instance within a second.")
        @OptionGroup var options: Options
        @Argument(help: "The device id (GET /devices).") var deviceId: String

        func run() async throws {
            _ = try await options.send(.DELETE, "/devices/\(deviceId)")
            print("revoked \(deviceId)")
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Give a device a new token; prints it once. The old token stops working.")
        @OptionGroup var options: Options
        @Argument(help: "The device id.") var deviceId: String

        func run() async throws {
            let rotated = try JSONDecoder().decode(RegisteredDevice.self, from: try await options.send(.POST, "/devices/\(deviceId)/token"))
            print(rotated.token)
        }
    }

    struct Role: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change a device's role (one of the schema's roles).")
        @OptionGroup var options: Options
        @Argument(help: "The device id.") var deviceId: String
        @Argument(help: "The new role.") var role: String

        func run() async throws {
            let body = String(decoding: try JSONEncoder().encode(DeviceUpdate(role: role)), as: UTF8.self)
            let info = try JSONDecoder().decode(DeviceInfo.self, from: try await options.send(.PATCH, "/devices/\(deviceId)", body: body))
            print("\(info.deviceId) is now \(info.role)")
        }
    }
}

/// A refused admin request, with the server's code and message (no usage text: the command was right).
struct AdminRequestFailed: Error, CustomStringConvertible {
    let description: String
}
