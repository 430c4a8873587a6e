import Foundation
import TestSupport
import Testing

/// The unit files under systemd/ are checked by systemd's own tools, offline.
@Suite("systemd units", .timeLimit(.minutes(5)))
struct SystemdUnitTests {
    static let unitDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("systemd")

    /// `verify` insists that ExecStart= exists, and syncd is not installed where the unit says
    /// (/usr/local/bin/syncd) on a build machine. Rather than edit the unit, verify it as it is
    /// inside a scratch root that holds the unit files, systemd's own units (for
    /// sysinit.target and friends) and an executable at the ExecStart path.
    @Test func verifyIsClean() async throws {
        let root = try await makeScratchRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // verify exits 0 on many warnings (e.g. an unknown Type=), so any output is a failure.
        let output = try await runCommand(["sh", "-c", "systemd-analyze verify --man=no --root=\"$1\" syncd.service syncd.socket 2>&1; echo \"exit=$?\"", "sh", root])
        #expect(output == "exit=0\n")
    }

    @Test func securityExposureIsAtMostTwo() async throws {
        let service = Self.unitDirectory.appendingPathComponent("syncd.service").path
        let output = try await runCommand(["systemd-analyze", "security", "--offline=true", "--threshold=20", "--no-pager", service])
        let line = try #require(output.split(separator: "\n").first { $0.contains("Overall exposure level") })
        // "→ Overall exposure level for syncd.service: 1.3 OK 🙂"
        let score = try #require(line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) })
        #expect(score <= 2.0, "\(line)")
    }

    /// systemd-analyze's own gate (`--threshold`, in tenths) passes the unit, and fails a copy
    /// with the hardening taken out: the gate is live, not a command whose exit nobody reads.
    @Test func securityThresholdGate() async throws {
        let service = Self.unitDirectory.appendingPathComponent("syncd.service").path
        #expect(try await Self.securityGateExit(service) == 0)

        let hardened = try String(contentsOfFile: service, encoding: .utf8)
        let weakened = hardened.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { line in !["Protect", "Restrict", "SystemCallFilter", "CapabilityBoundingSet", "NoNewPrivileges", "Private", "User=", "LockPersonality", "MemoryDeny"].contains { line.hasPrefix($0) } }
            .joined(separator: "\n")
        #expect(weakened != hardened)
        let directory = try await makeScratchRoot()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let copy = directory + "/syncd.service"
        try weakened.write(toFile: copy, atomically: true, encoding: .utf8)
        #expect(try await Self.securityGateExit(copy) != 0)
    }

    private static func securityGateExit(_ unit: String) async throws -> Int {
        let output = try await runCommand(["sh", "-c", "systemd-analyze security --offline=true --threshold=20 --no-pager \"$1\" >/dev/null 2>&1; echo $?", "sh", unit])
        return try #require(Int(output.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    @Test func unitKeepsTheRequiredSettings() throws {
        let text = try String(contentsOf: Self.unitDirectory.appendingPathComponent("syncd.service"), encoding: .utf8)
        for setting in [
            "Type=notify", "WatchdogSec=", "StateDirectory=syncd", "RuntimeDirectory=syncd", "User=syncd",
            "ProtectSystem=strict", "RestrictAddressFamilies=AF_UNIX AF_NETLINK AF_INET AF_INET6",
            "SystemCallFilter=@system-service", "CapabilityBoundingSet=\n", "ExecStart=/usr/local/bin/syncd",
            // syncd's statuses that a restart does not cure: a bad configuration, an unusable store.
            "RestartPreventExitStatus=78 73",
        ] {
            #expect(text.contains(setting), "\(setting)")
        }
        let sysusers = try String(contentsOf: Self.unitDirectory.appendingPathComponent("sysusers.d/syncd.conf"), encoding: .utf8)
        #expect(sysusers.contains("u syncd "))
    }

    private func makeScratchRoot() async throws -> String {
        var template = Array("/tmp/syncd-units-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaStyleError() }
        let root = String(cString: made)
        let fm = FileManager.default
        try fm.createDirectory(atPath: root + "/etc/systemd/system", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root + "/usr/local/bin", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root + "/usr/lib/systemd", withIntermediateDirectories: true)
        try await runCommand(["cp", "-a", "/usr/lib/systemd/system", root + "/usr/lib/systemd/"])
        for unit in ["syncd.service", "syncd.socket"] {
            try fm.copyItem(atPath: Self.unitDirectory.appendingPathComponent(unit).path, toPath: root + "/etc/systemd/system/" + unit)
        }
        let executable = root + "/usr/local/bin/syncd"
        try "#!/bin/sh\nexit 0\n".write(toFile: executable, atomically: true, encoding: .utf8)
        chmod(executable, 0o755)
        return root
    }
}
