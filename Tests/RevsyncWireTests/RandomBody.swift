import Foundation
import RevsyncLink
import Testing

/// Writes random sync requests and answers within the readers' shape, in JSON written by hand.
enum RandomBody {
    /// Checks a reader against the decoder on 3,000 random bodies from `write`: every one is
    /// read, and read as the decoder reads it. Then each is damaged at random: whatever the
    /// reader still reads, the decoder reads the same.
    static func compare<Message: Equatable>(
        seed: UInt64, write: (inout SplitMix64) -> [UInt8], read: ([UInt8]) -> Message?, decode: ([UInt8]) -> Message?
    ) {
        var random = SplitMix64(seed: seed)
        var damagedRead = 0
        for _ in 0..<3_000 {
            let json = write(&random)
            guard let expected = decode(json) else {
                Issue.record("the decoder refused a generated body: \(String(decoding: json, as: UTF8.self))")
                continue
            }
            #expect(read(json) == expected, "\(String(decoding: json, as: UTF8.self))")
            var damaged = json
            let position = Int(random.next() % UInt64(damaged.count))
            switch random.next() % 3 {
            case 0: damaged.remove(at: position)
            case 1: damaged.insert(punctuation(&random), at: position)
            default: damaged[position] = punctuation(&random)
            }
            if let taken = read(damaged) {
                damagedRead += 1
                #expect(taken == decode(damaged), "\(String(decoding: damaged, as: UTF8.self))")
            }
        }
        // Some damage leaves valid JSON (a space, a digit in a number): those are compared too.
        #expect(damagedRead > 0)
    }

    static func request(_ random: inout SplitMix64) -> [UInt8] {
        var members = [("maxRevision", integer(&random)), ("changeSets", array((0..<Int.random(in: 0...3, using: &random)).map { _ in changeSet(&random) }, &random))]
        switch Int.random(in: 0...3, using: &random) {
        case 0: members.append(("wait", "null"))
        case 1: members.append(("wait", String(Int.random(in: 0...60, using: &random))))
        case 2: members.append(("wait", "\(Int.random(in: 0...60, using: &random)).\(Int.random(in: 0...999, using: &random))"))
        default: break
        }
        return Array((space(&random) + object(members, &random) + space(&random)).utf8)
    }

    static func response(_ random: inout SplitMix64) -> [UInt8] {
        var members = [("maxRevision", integer(&random)), ("changeSets", array((0..<Int.random(in: 0...4, using: &random)).map { _ in changeSet(&random) }, &random))]
        if Bool.random(using: &random) { members.append(("more", ["true", "false", "null"][Int.random(in: 0...2, using: &random)])) }
        if Bool.random(using: &random) { members.append(("history", Bool.random(using: &random) ? quoted(String(random.next(), radix: 16), &random) : "null")) }
        if Bool.random(using: &random) { members.append(("lastSeq", Bool.random(using: &random) ? integer(&random) : "null")) }
        return Array((space(&random) + object(members.shuffled(using: &random), &random) + space(&random)).utf8)
    }

    static func changeSet(_ random: inout SplitMix64) -> String {
        var members: [(String, String)] = []
        if Bool.random(using: &random) { members.append(("seq", Bool.random(using: &random) ? integer(&random) : "null")) }
        if Bool.random(using: &random) { members.append(("revision", Bool.random(using: &random) ? integer(&random) : "null")) }
        if Bool.random(using: &random) { members.append(("conflict", ["true", "false", "null"][Int.random(in: 0...2, using: &random)])) }
        if Int.random(in: 0...3, using: &random) == 0 { members.append(("resync", ["true", "false", "null"][Int.random(in: 0...2, using: &random)])) }
        if Int.random(in: 0...3, using: &random) == 0 { members.append(("reason", Int.random(in: 0...4, using: &random) == 0 ? "null" : reason(&random))) }
        let names = Array(Set((0..<Int.random(in: 0...2, using: &random)).map { _ in name(&random) })).sorted()
        if !names.isEmpty || Bool.random(using: &random) { members.append(("types", array(names.map { quoted($0, &random) }, &random))) }
        for entity in names { members.append((entity, entityChanges(&random))) }
        return object(members.shuffled(using: &random), &random)
    }

    static func entityChanges(_ random: inout SplitMix64) -> String {
        var members: [(String, String)] = []
        for key in ["create", "update", "delete"] where Bool.random(using: &random) {
            members.append((key, Int.random(in: 0...5, using: &random) == 0 ? "null" : array((0..<Int.random(in: 0...3, using: &random)).map { _ in integer(&random) }, &random)))
        }
        if Bool.random(using: &random) {
            let ids = Set((0..<Int.random(in: 0...3, using: &random)).map { _ in Int64.random(in: -50...50, using: &random) })
            let byId = ids.map { id -> (String, String) in
                let names = Set((0..<Int.random(in: 0...3, using: &random)).map { _ in name(&random) })
                return (String(id), object(names.map { ($0, scalar(&random)) }, &random))
            }
            members.append(("attributes", object(byId, &random)))
        }
        return object(members.shuffled(using: &random), &random)
    }

    static func reason(_ random: inout SplitMix64) -> String {
        let codes = ["stale_revision", "not_found", "forbidden", "invalid", "reference"]
        var members = [("code", quoted(codes[Int.random(in: 0..<codes.count, using: &random)], &random)), ("message", quoted(text(&random), &random))]
        if Bool.random(using: &random) { members.append(("entity", Bool.random(using: &random) ? quoted(name(&random), &random) : "null")) }
        if Bool.random(using: &random) { members.append(("id", Bool.random(using: &random) ? integer(&random) : "null")) }
        return object(members.shuffled(using: &random), &random)
    }

    static func scalar(_ random: inout SplitMix64) -> String {
        switch Int.random(in: 0...5, using: &random) {
        case 0: "null"
        case 1: Bool.random(using: &random) ? "true" : "false"
        case 2: integer(&random)
        case 3: number(&random)
        default: quoted(text(&random), &random)
        }
    }

    /// A number that is not a plain integer within Int64: a fraction, an exponent, too many digits.
    static func number(_ random: inout SplitMix64) -> String {
        switch Int.random(in: 0...5, using: &random) {
        case 0: String(Double.random(in: -1e6...1e6, using: &random))
        case 1: ["2.0", "-0.0", "0.5", "1e+15", "1E2", "1e-05", "-2.5e-3", "1e400", "123456789012345678901"][Int.random(in: 0...8, using: &random)]
        case 2: "\(Int.random(in: -99...99, using: &random)).\(Int.random(in: 0...99, using: &random))e\(["", "+", "-"][Int.random(in: 0...2, using: &random)])\(Int.random(in: 0...30, using: &random))"
        case 3: String(Double(Int64.random(in: Int64.min...Int64.max, using: &random)) * 1e3)
        default: String(Double.random(in: -1...1, using: &random))
        }
    }

    static func integer(_ random: inout SplitMix64) -> String {
        switch Int.random(in: 0...3, using: &random) {
        case 0: String(Int64.random(in: Int64.min...Int64.max, using: &random))
        case 1: String([Int64.min, Int64.max, 0, -1][Int.random(in: 0...3, using: &random)])
        default: String(Int64.random(in: -1_000...1_000, using: &random))
        }
    }

    static func name(_ random: inout SplitMix64) -> String {
        ["notes", "players", "a", "t\u{e9}", "x_y", "Z9"][Int.random(in: 0...5, using: &random)]
    }

    static func text(_ random: inout SplitMix64) -> String {
        let pieces = ["a", "b c", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{e9}", "\u{20ac}", "\u{1F600}", "0", " "]
        return (0..<Int.random(in: 0...6, using: &random)).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &random)] }.joined()
    }

    /// A JSON string, each character written plainly or as an escape, at random.
    static func quoted(_ value: String, _ random: inout SplitMix64) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            let escapeAnyway = Int.random(in: 0...4, using: &random) == 0
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += Bool.random(using: &random) ? "\\n" : "\\u000a"
            case "\t": out += "\\t"
            case "/": out += escapeAnyway ? "\\/" : "/"
            case _ where scalar.value < 0x20 || escapeAnyway:
                for unit in String(scalar).utf16 { out += "\\u" + String(format: "%04x", unit) }
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static func object(_ members: [(String, String)], _ random: inout SplitMix64) -> String {
        "{" + space(&random) + members.map { quoted($0.0, &random) + space(&random) + ":" + space(&random) + $0.1 }.joined(separator: space(&random) + "," + space(&random)) + space(&random) + "}"
    }

    static func array(_ elements: [String], _ random: inout SplitMix64) -> String {
        "[" + space(&random) + elements.joined(separator: space(&random) + "," + space(&random)) + space(&random) + "]"
    }

    static func space(_ random: inout SplitMix64) -> String {
        ["", "", "", " ", "\n", "\t ", "\r\n"][Int.random(in: 0...6, using: &random)]
    }

    static func punctuation(_ random: inout SplitMix64) -> UInt8 {
        let bytes = Array(#"{}[]:,"\ 0159-.eEtfnul"#.utf8)
        return bytes[Int.random(in: 0..<bytes.count, using: &random)]
    }
}
