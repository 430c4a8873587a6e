import SyncControl
/// Error messages rearranged for a line that may be cut at the terminal's edge.
///
/// Feed errors read `GET https://host/very/long/path: HTTP 404 Not Found`; cut at 60 columns,
/// only the URL would survive. Shown cause first and request last, the cut takes the URL.
public enum ErrorText {
    /// Splits `METHOD URL: cause` into the cause and the request; other messages are all cause.
    public static func split(_ message: String) -> (cause: String, request: String?) {
        guard let space = message.firstIndex(of: " ") else { return (message, nil) }
        let method = message[..<space]
        guard !method.isEmpty, method.allSatisfy({ $0.isASCII && $0.isUppercase }) else { return (message, nil) }
        // The URL has no spaces; the cause follows the first ": " after it.
        let rest = message[message.index(after: space)...]
        guard let separator = rest.range(of: ": "), !rest[..<separator.lowerBound].contains(" ") else { return (message, nil) }
        let cause = rest[separator.upperBound...]
        guard !cause.isEmpty else { return (message, nil) }
        return (String(cause), String(message[..<separator.lowerBound]))
    }

    /// `cause · request`, or the message unchanged when it names no request.
    public static func causeFirst(_ message: String) -> String {
        let (cause, request) = split(message)
        guard let request else { return cause }
        return "\(cause) · \(request)"
    }
}
