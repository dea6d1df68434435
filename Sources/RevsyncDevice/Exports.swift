// The shared vocabulary the device's public API names (`DeviceError.restricted`'s
// `RecordKey`, `RecordStore`'s `TemporaryIdMapping`, `LocalSchema.relations(to:)`),
// so that an app needs only `import RevsyncDevice`, as Hummingbird re-exports HTTPTypes.
@_exported import struct RevsyncRules.RecordKey
@_exported import struct RevsyncRules.Relation
@_exported import struct RevsyncRules.TemporaryIdMapping
