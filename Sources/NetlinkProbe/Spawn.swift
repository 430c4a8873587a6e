import CNetlink
import Foundation

/// Where a spawned program's standard input, output or error comes from or goes to.
public enum SpawnedStream: Sendable {
    /// The spawning process's own.
    case inherited
    /// `/dev/null`.
    case null
    /// A file opened for appending (created when missing).
    case appending(to: String)
    /// A descriptor of the spawning process, which the child gets a copy of.
    case descriptor(Int32)
    /// Standard error only: wherever standard output goes.
    case standardOutput
}

/// Starts a program: the one way tests, benchmarks and their tools do (``runCommand(_:input:allowFailure:timeout:)``,
/// ``ChildProcess``, the rest on top of those). Returns its process id; the caller reaps it with `waitpid`.
///
/// `arguments` run through `/usr/bin/env`, so a program is looked up in `PATH`. The child gets
/// its three standard streams as asked and nothing else of the spawning process's descriptors:
/// the test process holds sockets without `FD_CLOEXEC` (NIO accepts connections without it), and
/// a child that inherited one would keep a connection open after its server closed or reset it.
/// `environment` replaces the spawning process's environment when given. With
/// `newProcessGroup`, the child leads a process group of its own, so `kill(-pid, …)` reaches
/// everything it starts. With `defaultSignals`, no signal is blocked in the child and SIGTERM,
/// SIGINT, SIGHUP, SIGPIPE and SIGCHLD have their default actions, whatever the spawning thread
/// blocked or ignored (a dbus-daemon spawned with SIGTERM blocked never stops on it).
///
/// Spawned with posix_spawn, not with Foundation's `Process`: in a test process with many
/// descriptors open and many children at once, `Process.run()` crashed copying its descriptor list
/// and `waitUntilExit()` missed an exit (both seen in full runs). Throws ``CommandFailed`` when
/// the program cannot be started.
public func spawn(
    _ arguments: [String],
    standardInput: SpawnedStream = .null,
    standardOutput: SpawnedStream = .inherited,
    standardError: SpawnedStream = .inherited,
    environment: [String: String]? = nil,
    newProcessGroup: Bool = false,
    defaultSignals: Bool = false
) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for (fd, stream) in [(Int32(0), standardInput), (1, standardOutput), (2, standardError)] {
        switch stream {
        case .inherited: break
        case .null: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        case .appending(let path): posix_spawn_file_actions_addopen(&actions, fd, path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        case .descriptor(let source): posix_spawn_file_actions_adddup2(&actions, source, fd)
        case .standardOutput: posix_spawn_file_actions_adddup2(&actions, 1, fd)
        }
    }
    closeInheritedDescriptors(&actions)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var flags: Int32 = 0
    if newProcessGroup {
        flags |= Int32(POSIX_SPAWN_SETPGROUP)
        posix_spawnattr_setpgroup(&attributes, 0)
    }
    if defaultSignals {
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        flags |= Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
    }
    posix_spawnattr_setflags(&attributes, Int16(flags))
    let argv = (["/usr/bin/env"] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp ?? [] { free(pointer) }
    }
    var pid: pid_t = 0
    let result = envp.map { envp in posix_spawn(&pid, "/usr/bin/env", &actions, &attributes, argv, envp) }
        ?? posix_spawn(&pid, "/usr/bin/env", &actions, &attributes, argv, environ)
    guard result == 0 else {
        throw CommandFailed(command: arguments, status: -1, stderr: "cannot start: \(String(cString: strerror(result)))")
    }
    return pid
}

/// The exit code in a `waitpid` status, or 128 + the signal that ended the process, as a shell
/// reports it.
public func exitCode(ofWaitStatus status: Int32) -> Int32 {
    // WIFEXITED / WTERMSIG spelled out: the macros are not imported.
    let signal = status & 0x7f
    return signal == 0 ? (status >> 8) & 0xff : 128 + signal
}

/// A pipe whose two ends are close-on-exec (set atomically, as other threads spawn too): a child
/// gets an end only as a standard stream, through ``spawn(_:standardInput:standardOutput:standardError:environment:newProcessGroup:defaultSignals:)``.
public func makePipe() throws -> (read: Int32, write: Int32) {
    var ends: [Int32] = [-1, -1]
    guard pipe2(&ends, O_CLOEXEC) == 0 else {
        throw CommandFailed(command: ["pipe2"], status: -1, stderr: "pipe: \(String(cString: strerror(errno)))")
    }
    return (ends[0], ends[1])
}
