import Foundation
import Varlink

/// JSON in the wire's conventions (RFC 3339 dates, sorted keys), for `--json` output and for
/// clients that store or forward the DTOs.
public enum ControlJSON {
    /// An encoder that writes what the control socket writes.
    public static func makeEncoder() -> JSONEncoder { VarlinkCoding.makeEncoder() }
    /// A decoder that reads what the control socket writes.
    public static func makeDecoder() -> JSONDecoder { VarlinkCoding.makeDecoder() }
}
