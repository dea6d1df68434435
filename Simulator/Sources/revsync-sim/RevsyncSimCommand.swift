import ArgumentParser
import RevsyncSim

@main
struct RevsyncSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "revsync-sim", abstract: "The Revsync soak simulator.")

    func run() async throws {}
}
