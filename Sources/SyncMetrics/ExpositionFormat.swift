import Foundation

/// The two text formats a scraper may ask for.
public enum ExpositionFormat: String, Sendable, Hashable, CaseIterable {
    /// Prometheus's text format 0.0.4, what swift-prometheus emits.
    case prometheusText
    /// OpenMetrics 1.0.0, which Prometheus asks for first.
    case openMetrics

    /// The `Content-Type` of a response in this format.
    public var contentType: String {
        switch self {
        case .prometheusText: "text/plain; version=0.0.4; charset=utf-8"
        case .openMetrics: "application/openmetrics-text; version=1.0.0; charset=utf-8"
        }
    }

    /// The format an HTTP `Accept` header prefers: OpenMetrics when it names
    /// `application/openmetrics-text` with a quality no lower than any other acceptable type's,
    /// else the Prometheus text format (also for no header, which any client takes).
    public static func negotiate(accept: String?) -> ExpositionFormat {
        guard let accept else { return .prometheusText }
        var openMetrics = 0.0
        var other = 0.0
        for range in accept.split(separator: ",") {
            let parameters = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let type = parameters.first?.lowercased(), !type.isEmpty else { continue }
            var quality = 1.0
            for parameter in parameters.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if pair.count == 2, pair[0].lowercased() == "q", let value = Double(pair[1]), value.isFinite {
                    quality = min(max(value, 0), 1)
                }
            }
            if type == "application/openmetrics-text" {
                openMetrics = max(openMetrics, quality)
            } else {
                other = max(other, quality)
            }
        }
        return openMetrics > 0 && openMetrics >= other ? .openMetrics : .prometheusText
    }
}

/// OpenMetrics from swift-prometheus's Prometheus text.
///
/// The two formats differ, for what syncd exports, in three places, all in the metadata: an
/// OpenMetrics counter family is named without its samples' `_total` suffix; a gauge family
/// named `…_info` is OpenMetrics's `info` type, named without the suffix; and the exposition
/// ends with `# EOF`. Sample lines are the same in both, so they pass through untouched.
enum OpenMetrics {
    static func convert(prometheusText text: [UInt8]) -> [UInt8] {
        let lines = text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
        // Help lines come before their type line: learn every family's new name first.
        var renamed: [String: (name: String, type: String)] = [:]
        for line in lines {
            guard let (keyword, name, rest) = metadata(line), keyword == "TYPE" else { continue }
            if rest == "counter", name.hasSuffix("_total") {
                renamed[name] = (String(name.dropLast(6)), "counter")
            } else if rest == "gauge", name.hasSuffix("_info") {
                renamed[name] = (String(name.dropLast(5)), "info")
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(text.count + 8)
        for line in lines {
            if let (keyword, name, rest) = metadata(line), let family = renamed[name] {
                out += Array("# \(keyword) \(family.name) \(keyword == "TYPE" ? family.type : rest)".utf8)
            } else {
                out += line
            }
            out.append(UInt8(ascii: "\n"))
        }
        out += Array("# EOF\n".utf8)
        return out
    }

    /// A `# TYPE` or `# HELP` line's keyword, family name and the rest (the type, or the help).
    private static func metadata(_ line: ArraySlice<UInt8>) -> (String, String, String)? {
        guard line.first == UInt8(ascii: "#") else { return nil }
        let words = line.split(separator: UInt8(ascii: " "), maxSplits: 3, omittingEmptySubsequences: false)
        guard words.count == 4 else { return nil }
        let keyword = String(decoding: words[1], as: UTF8.self)
        guard keyword == "TYPE" || keyword == "HELP" else { return nil }
        return (keyword, String(decoding: words[2], as: UTF8.self), String(decoding: words[3], as: UTF8.self))
    }
}
