import Foundation

/// A private `dbus-daemon` for tests and benchmarks that stand in for NetworkManager: its socket and
/// configuration in a directory of the caller's, and a policy that lets every client own any name,
/// send anywhere and eavesdrop, so that a fake NetworkManager needs no system policy file.
public struct PrivateBusConfiguration: Sendable {
    /// The address clients connect to (`unix:path=…`), for `DBUS_SYSTEM_BUS_ADDRESS` and the fake.
    public let address: String
    /// What follows the `dbus-daemon` executable on its command line: this configuration, in the
    /// foreground, printing its address once it listens (the caller's sign that it is ready).
    public let arguments: [String]

    /// Writes the configuration (`bus.conf`, listening on `bus`) into `directory`, which must exist.
    public init(writingInto directory: String) throws {
        let socket = directory + "/bus"
        let config = directory + "/bus.conf"
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """.write(toFile: config, atomically: true, encoding: .utf8)
        address = "unix:path=\(socket)"
        arguments = ["--config-file=\(config)", "--nofork", "--print-address"]
    }
}
