import ArgumentParser
import CMalloc
import CSQLiteConfig
import EventLoopExecutor
import Foundation
import HTTPFeedSource
import Logging
import ServiceLifecycle
import SyncDaemon
import SyncStore

/// The entry point: caps malloc's arenas and puts Swift Concurrency's global executor on
/// SwiftNIO's singleton event loops before any task runs, then runs the command.
///
/// On libdispatch's global queues, the first worker thread starts a pool monitor that wakes the
/// process every second for good: an idle daemon would never be idle. On NIO's loops (which
/// AsyncHTTPClient and the control socket use anyway) a task resumed by a response also runs on the
/// loop that read it, with no hand-over to another thread per page. Sleeps stay off libdispatch
/// through `EventLoopClock`.
@main
enum SyncdMain {
    static func main() async {
        // Two malloc arenas, not glibc's default of eight per core: the event loop and the SQLite
        // writer allocate side by side without contending, and the daemon's other threads, which
        // allocate little, do not each keep an arena of free blocks. Set before any thread starts;
        // MALLOC_ARENA_MAX in the environment (glibc's own tunable) still decides when set.
        if ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil { mallopt(M_ARENA_MAX, 2) }
        // SQLite's memory statistics take a process-wide mutex on every allocation, a cost the
        // writer pays throughout a backfill for figures the daemon never reads (BENCHMARKS.md,
        // "SQLite's memory statistics turned off"). Only takes effect before the store opens
        // (SQLite initialises on the first open).
        _ = syncd_sqlite3_disable_memory_statistics()
        // Not SwiftNIO's own install, which finds the runtime's hook with dlsym: the installed
        // syncd links the Swift runtime in, where dlsym finds nothing.
        if !EventLoopGlobalExecutor.install() {
            FileHandle.standardError.write(Data("syncd: warning: Swift's global executor hook was taken; tasks run on libdispatch's threads\n".utf8))
        }
        await Syncd.main()
    }
}

/// `syncd`: the daemon. A thin command over ``SyncDaemonService``.
struct Syncd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "syncd",
        abstract: "Mirror paginated feeds into a local SQLite store, following network connectivity.",
        discussion: "Configuration: \(DaemonConfiguration.defaultPath) (TOML). Control: syncctl, or any Varlink client on the control socket.",
        version: SyncDaemonService.version
    )

    @Option(help: "Configuration file.")
    var config: String = DaemonConfiguration.defaultPath

    @Flag(help: "Run on the embedded default: a bundled demo feed served on loopback, synced into a store under /tmp/syncd-demo.")
    var demo = false

    @Flag(help: "Check the configuration, print a summary, and exit.")
    var checkConfig = false

    @Option(help: "Override the store path from the configuration.")
    var store: String?

    @Option(help: "Override the control socket path from the configuration.")
    var socket: String?

    @Option(help: "Override the log level (trace, debug, info, notice, warning, error, critical).")
    var logLevel: String?

    @Option(help: ArgumentHelp("Read one page of a feed (a URL, or a feed's name in the configuration) as a sync would, show what was found and how its pages link, store nothing, and exit.", valueName: "url-or-feed"))
    var probe: String?

    @Option(help: ArgumentHelp("With --probe: read the page in this API's dialect (\(FeedDialect.allCases.map(\.rawValue).joined(separator: ", "))).", valueName: "name"))
    var dialect: String?

    func run() async throws {
        if let probe {
            try await runProbe(probe)
            return
        }
        var configuration: DaemonConfiguration
        if demo {
            configuration = DemoDefaults.configuration()
        } else {
            do {
                configuration = try DaemonConfiguration.load(path: config)
            } catch {
                // The message names the file, line and key; systemd shows it in `systemctl status`.
                FileHandle.standardError.write(Data("syncd: invalid configuration: \(error)\n".utf8))
                throw ExitCode(78)  // EX_CONFIG: systemd's RestartPreventExitStatus keeps it from looping.
            }
        }
        if let store { configuration.storePath = store }
        if let socket { configuration.controlSocketPath = socket }
        if let logLevel {
            guard let level = Logger.Level(rawValue: logLevel) else { throw ValidationError("unknown log level '\(logLevel)'") }
            configuration.logLevel = level
        }
        if checkConfig {
            print("configuration OK: \(configuration.feeds.count) feed(s): \(configuration.feeds.map(\.name).joined(separator: ", "))")
            print("store \(configuration.storePath), control socket \(configuration.controlSocketPath), settle \(configuration.settle)")
            for feed in configuration.feeds {
                print("feed \(feed.name): \(feed.http.url.redactedForLog), dialect \(feed.dialect?.rawValue ?? "none (the keys' defaults)")")
                for line in feed.http.descriptor.summary { print("  \(line)") }
                if let window = feed.sync.revalidate {
                    let part = if case .items(let count) = window { "the newest \(count) items" } else { "the whole feed" }
                    print("  revalidation: \(part) read again at most every \(feed.sync.revalidateInterval)")
                }
            }
            return
        }

        let level = configuration.logLevel
        LoggingSystem.bootstrap { label in JournalLogHandler(label: label, level: level) }
        let logger = Logger(label: "syncd")

        // Named: without a name, swift-service-lifecycle describes each service through
        // reflection of all it holds (its whole configuration), at start-up, for log metadata.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if demo {
            let server = try await DemoFeedProcess.start(
                feed: DemoDefaults.feedName, items: DemoDefaults.items, perSecond: DemoDefaults.itemsPerSecond,
                logger: Logger(label: "syncd.demo-feed"))
            configuration = DemoDefaults.configuration(port: server.port, overriding: configuration)
            logger.info("demo feed serving on http://127.0.0.1:\(server.port)/feeds/\(DemoDefaults.feedName)")
            services.append(.init(service: server, serviceName: "demo feed"))
        }
        services.append(.init(service: SyncDaemonService(configuration: configuration, logger: logger), serviceName: "syncd"))
        let group = ServiceGroup(configuration: .init(
            services: services,
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        ))
        do {
            try await group.run()
        } catch let fault as StoreFault {
            // Said in the journal already; stderr too, for a run by hand.
            FileHandle.standardError.write(Data("syncd: \(fault)\n".utf8))
            throw ExitCode([.damaged, .replaced].contains(fault.kind) ? Self.damagedStore : Self.unusableStore)
        }
    }

    /// `--probe`: one page read and described (``Probe``). A URL needs no configuration; a
    /// feed's name is looked up in it. Exits 1 when no page could be read, 64 (EX_USAGE) for an
    /// unknown dialect.
    private func runProbe(_ target: String) async throws {
        var chosen: FeedDialect?
        if let dialect {
            guard let known = FeedDialect(rawValue: dialect.lowercased()) else {
                FileHandle.standardError.write(Data("syncd: unknown dialect '\(dialect)' (known: \(FeedDialect.allCases.map(\.rawValue).joined(separator: ", ")))\n".utf8))
                throw ExitCode(64)
            }
            chosen = known
        }
        let isURL = target.contains("://")
        let configuration = isURL ? nil : try? DaemonConfiguration.load(path: config)
        do {
            print(try await Probe.run(target, dialect: chosen, configuration: configuration))
        } catch {
            FileHandle.standardError.write(Data("syncd: probe: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }

    /// The exit status when the store cannot be used (EX_CANTCREAT): no restart helps until
    /// someone acts, and the unit's RestartPreventExitStatus names it.
    static let unusableStore: Int32 = 73
    /// The exit status when the store was found damaged, deleted or replaced while running
    /// (EX_IOERR): the unit restarts syncd, whose start opens the path anew.
    static let damagedStore: Int32 = 74
}
