import RevsyncWire

extension DeviceMeta {
    /// The counters moved past what the server has already seen of the device
    /// (`GET /devices/me`): `nextSeq` after `lastSeq`, `nextTemporaryId` below
    /// `lowestTemporaryId`. A file restored from a backup has counters behind the
    /// server's; without this its next change sets would reuse seqs and temporary
    /// ids the server knows as other content. Counters already past stay.
    public func movedPast(lastSeq: Int64, lowestTemporaryId: Int64) -> DeviceMeta {
        var meta = self
        meta.nextSeq = Swift.max(nextSeq, lastSeq + 1)
        if lowestTemporaryId <= nextTemporaryId { meta.nextTemporaryId = lowestTemporaryId - 1 }
        return meta
    }

    /// `movedPast(lastSeq:lowestTemporaryId:)` with the server's answer.
    public func movedPast(_ device: DeviceInfo) -> DeviceMeta {
        movedPast(lastSeq: device.lastSeq, lowestTemporaryId: device.lowestTemporaryId)
    }
}
