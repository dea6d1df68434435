import Foundation

/// Runs a program and returns its standard output; a failure throws with its standard error.
///
/// Output goes to files and the exit is awaited through the termination handler: blocking
/// reads or `waitUntilExit` would hold one of the few threads a live server in the same
/// process runs on.
public func runProgram(_ arguments: [String], input: Data? = nil) async throws -> Data {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("program-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let (inputFile, outputFile, errorFile) = (
        directory.appendingPathComponent("in"), directory.appendingPathComponent("out"), directory.appendingPathComponent("err")
    )
    try (input ?? Data()).write(to: inputFile)
    _ = FileManager.default.createFile(atPath: outputFile.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.standardInput = try FileHandle(forReadingFrom: inputFile)
    process.standardOutput = try FileHandle(forWritingTo: outputFile)
    process.standardError = try FileHandle(forWritingTo: errorFile)
    let status = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
        process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
        do {
            try process.run()
        } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: error)
        }
    }
    guard status == 0 else {
        let failure = (try? Data(contentsOf: errorFile)) ?? Data()
        throw ProgramFailure(description: "\(arguments.joined(separator: " ")) failed (\(status)): \(String(decoding: failure, as: UTF8.self))")
    }
    return try Data(contentsOf: outputFile)
}

/// A program that could not run or exited with a failure, with its standard error.
public struct ProgramFailure: Error, CustomStringConvertible {
    public let description: String
}
