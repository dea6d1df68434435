import RevsyncHarness
import Testing

@Suite struct FreePortTests {
    @Test func loopbackPortsAreDistinctAndBindable() throws {
        let ports = try FreePort.loopback(count: 3)
        #expect(Set(ports).count == 3)
        #expect(ports.allSatisfy(FreePort.canBind))
    }

    @Test func kernelChosenPortIsBindable() throws {
        let port = try FreePort.kernelChosenPort()
        #expect(port > 0)
        #expect(FreePort.canBind(port))
    }
}
