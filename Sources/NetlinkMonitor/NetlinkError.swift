import CNetlink

/// A failure reported by libnl or by a system call the monitor makes.
public struct NetlinkError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What the monitor was doing.
    public var operation: String
    /// libnl's error code (positive, `NLE_*`), or `nil` for a system call failure.
    public var libnlCode: Int32?
    /// The message from `nl_geterror` or `strerror`.
    public var message: String

    /// From a negative libnl return value.
    init(_ operation: String, libnl code: Int32) {
        self.operation = operation
        self.libnlCode = abs(code)
        self.message = String(cString: nl_geterror(code))
    }

    /// From `errno` after a failed system call.
    init(_ operation: String, errno code: Int32) {
        self.operation = operation
        self.libnlCode = nil
        self.message = String(cString: strerror(code))
    }

    /// `operation: message`, e.g. for logs.
    public var description: String { "\(operation): \(message)" }

    /// libnl reports the kernel's ENOBUFS (notifications dropped) as `NLE_NOMEM`.
    var isOverflow: Bool { libnlCode == Int32(NLE_NOMEM) }
}

/// Throws a ``NetlinkError`` when a libnl call returned a negative code.
@discardableResult
func check(_ operation: @autoclosure () -> String, _ result: Int32) throws(NetlinkError) -> Int32 {
    if result < 0 { throw NetlinkError(operation(), libnl: result) }
    return result
}
