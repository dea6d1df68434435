/// Wakes a device's sync loop when its user made a change, so the change is
/// sent at once instead of at the next poll. A wake with nobody waiting is kept
/// for the next wait.
actor WakeSignal {
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var pending = false

    func wake() {
        if waiters.isEmpty {
            pending = true
        } else {
            waiters.forEach { $0.resume() }
            waiters = []
        }
    }

    /// Returns after a wake, `timeout`, or cancellation.
    func wait(timeout: Duration) async {
        if pending {
            pending = false
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                try? await Task.sleep(for: timeout)
                await self.wake()
            }
            // On cancellation the sleeping child ends at once and wakes us.
            await withCheckedContinuation { waiters.append($0) }
            group.cancelAll()
        }
        pending = false
    }
}
