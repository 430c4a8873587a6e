import Foundation
import SyncDaemon
import Testing
import TestSupport

@Suite struct ConfigurationTests {
    let valid = """
        [daemon]
        store = "/var/lib/syncd/test.sqlite"
        control_socket = "/run/syncd/test"
        control_group = "wheel"
        log_level = "debug"

        [network]
        settle = "1500ms"
        receive_buffer = 1048576

        [retry]
        base = 2
        multiplier = 2.0
        cap = "1m"
        max_attempts = 5
        reconnect_spread = "0s"

        [[feed]]
        name = "home"
        url = "https://mastodon.example/api/v1/timelines/home"
        page_size = 40
        refresh_interval = "5m"
        backfill = 500
        token_file = "/etc/syncd/home.token"

        [[feed]]
        name = "issues"
        url = "http://192.0.2.10:8080/feeds/issues?limit=10"
        id_field = "number"
        timeout = 5
        """

    @Test func readsEveryKey() throws {
        let config = try DaemonConfiguration.parse(valid)
        #expect(config.storePath == "/var/lib/syncd/test.sqlite")
        #expect(config.controlSocketPath == "/run/syncd/test")
        #expect(config.controlGroup == "wheel")
        #expect(config.logLevel == .debug)
        #expect(config.settle == .milliseconds(1500))
        #expect(config.receiveBufferSize == 1 << 20)
        #expect(config.retry.base == .seconds(2))
        #expect(config.retry.multiplier == 2)
        #expect(config.retry.cap == .seconds(60))
        #expect(config.retry.maxAutomaticAttempts == 5)
        #expect(config.reconnectSpread == .zero)
        #expect(config.feeds.map(\.name) == ["home", "issues"])
        let home = config.feeds[0]
        #expect(home.http.url.absoluteString == "https://mastodon.example/api/v1/timelines/home?limit=40")
        #expect(home.sync.refreshInterval == .seconds(300))
        #expect(home.sync.backfillDepth == 500)
        #expect(home.sync.retry.maxAutomaticAttempts == 5)
        #expect(home.sync.reconnectSpread == .zero)
        #expect("\(home.http.authorization!)" == "bearer token from /etc/syncd/home.token")
        let issues = config.feeds[1]
        #expect(issues.http.idField == "number")
        #expect(issues.http.requestTimeout == .seconds(5))
        #expect(issues.http.url.query == "limit=10")
    }

    @Test func tokenIsNeverPrinted() throws {
        let config = try DaemonConfiguration.parse(feedTables(
            .init(name: "a", url: "https://example.org/feed", lines: [#"token = "s3cr3t-value""#])))
        #expect(!"\(config.feeds[0].http)".contains("s3cr3t"))
    }

    /// Each bad configuration names the key and the line it is on.
    @Test(arguments: [
        ("[[feed]]\nname = \"a\"\nurl = \"ftp://x/y\"\n", 3, "feed[0].url", "http or https"),
        ("[[feed]]\nname = \"a\"\n", nil, "feed[0].url", "is required"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\npage_sise = 5\n", 4, "feed[0].page_sise", "unknown key"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\npage_size = \"many\"\n", 4, "feed[0].page_size", "must be an integer"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\n[[feed]]\nname = \"b\"\nurl = \"http://h/g\"\nrefresh_interval = \"soon\"\n", 7, "feed[1].refresh_interval", "duration"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\n[[feed]]\nname = \"a\"\nurl = \"http://h/g\"\n", 5, "feed[1].name", "duplicate"),
        ("[daemon]\nlog_level = \"loud\"\n[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\n", 2, "daemon.log_level", "must be one of"),
        ("[retry]\nbase = \"10s\"\ncap = \"1s\"\n[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\n", 3, "retry.cap", "smaller than base"),
        ("[network]\nsettle = -1\n[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\n", 2, "network.settle", "duration"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\ntoken = \"t\"\ntoken_file = \"/f\"\n", 5, "feed[0].token_file", "not both"),
        ("[daemon]\nstore = \n", 2, nil, "TOML syntax"),
        ("", nil, "feed", "no [[feed]]"),
        ("[deamon]\n[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\n", 1, "deamon", "unknown key"),
    ] as [(String, Int?, String?, String)])
    func badConfigurationIsLocated(text: String, line: Int?, key: String?, message: String) {
        if let error = expectRefusal(text, file: "test.toml", line: line, key: key, message: message) {
            #expect("\(error)".hasPrefix("test.toml" + (line.map { ":\($0)" } ?? "") + ": "))
        }
    }

    @Test func durationsTakeUnits() throws {
        for (text, expected) in [("\"250ms\"", Duration.milliseconds(250)), ("\"3s\"", .seconds(3)), ("\"2m\"", .seconds(120)), ("\"1h\"", .seconds(3600)), ("1.5", .milliseconds(1500))] {
            let config = try DaemonConfiguration.parse("[network]\nsettle = \(text)\n[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\n")
            #expect(config.settle == expected, "\(text)")
        }
    }

    @Test func exampleConfigurationInTheRepositoryIsValid() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let config = try DaemonConfiguration.load(path: root.appendingPathComponent("config/syncd.toml").path)
        #expect(!config.feeds.isEmpty)
    }

    @Test func daemonRefusesABadConfigurationWithExitCode78() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("bad.toml")
        try "[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\nbackfill = \"all\"\n".write(toFile: path, atomically: true, encoding: .utf8)
        let syncd = try BuildProducts.path("syncd")
        let process = try ChildProcess([syncd, "--config", path], logPath: dir.file("log"))
        let status = await process.stop(signal: 0, timeout: hangGuard)
        #expect(status == 78)
        #expect(process.output.contains("\(path):4: feed[0].backfill: must be an integer"), "\(process.output)")
    }

    @Test func checkConfigSummarises() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("ok.toml")
        try valid.write(toFile: path, atomically: true, encoding: .utf8)
        let output = try await runCommand([try BuildProducts.path("syncd"), "--config", path, "--check-config"])
        #expect(output.contains("configuration OK: 2 feed(s): home, issues"))
        // Revalidation is told with the feed's reading.
        try (valid + "\nrevalidate = 200\nrevalidate_interval = \"15m\"\n").write(toFile: path, atomically: true, encoding: .utf8)
        let revalidating = try await runCommand([try BuildProducts.path("syncd"), "--config", path, "--check-config"])
        #expect(revalidating.contains("revalidation: the newest 200 items read again at most every 900.0 seconds"), "\(revalidating)")
    }
}

@Suite struct InstallTests {
    @Test func installStagesBinariesUnitsAndConfiguration() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let stage = try TemporaryDirectory(prefix: "syncd-install")
        let bin = BuildProducts.directory.path
        let output = try await runCommand([root.appendingPathComponent("scripts/install").path, "--destdir", stage.path, "--bin-dir", bin])
        #expect(output.contains("installed into \(stage.path)"))
        for file in ["usr/local/bin/syncd", "usr/local/bin/syncctl"] {
            #expect(FileManager.default.isExecutableFile(atPath: stage.file(file)), "\(file)")
        }
        for file in ["etc/systemd/system/syncd.service", "etc/systemd/system/syncd.socket", "usr/lib/sysusers.d/syncd.conf", "etc/syncd/syncd.toml"] {
            #expect(FileManager.default.fileExists(atPath: stage.file(file)), "\(file)")
        }
        // The installed example configuration is valid for the installed daemon.
        let check = try await runCommand([stage.file("usr/local/bin/syncd"), "--config", stage.file("etc/syncd/syncd.toml"), "--check-config"])
        #expect(check.contains("configuration OK"))
        // A second install keeps the operator's configuration.
        try "# mine\n".write(toFile: stage.file("etc/syncd/syncd.toml"), atomically: true, encoding: .utf8)
        try await runCommand([root.appendingPathComponent("scripts/install").path, "--destdir", stage.path, "--bin-dir", bin])
        #expect(try String(contentsOfFile: stage.file("etc/syncd/syncd.toml"), encoding: .utf8) == "# mine\n")
    }
}
