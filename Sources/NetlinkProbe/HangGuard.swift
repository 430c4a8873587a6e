/// How long a test waits for something that should happen before it gives up: a guard against
/// a hang, not a performance bound (those live in the benchmarks). ``ChildProcess`` bounds its
/// waits with it; tests see it through TestSupport.
///
/// The full suite starts ~400 tests at once on this project's 2-core machines, and its first
/// seconds are congested: a server noticing a client's hang-up, 0.03 s in a run of its own, took
/// 7–11 s there.
public let hangGuard: Duration = .seconds(30)
