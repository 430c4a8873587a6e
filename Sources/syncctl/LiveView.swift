import Dispatch
import Foundation
import SyncControl
import SyncTerminal

/// The full-screen loop of `syncctl watch` on a terminal.
///
/// Status updates and a fixed tick feed one event stream; every frame is drawn from the latest
/// status and a single animation clock, so all skeleton rows shimmer in the same phase.
struct LiveView {
    var feed: String?
    var environment: [String: String]

    /// 80 ms: smooth enough for the spinner and shimmer, cheap enough to leave running.
    static let tick: Duration = .milliseconds(80)

    enum Event: Sendable {
        case status(ControlStatus)
        case tick
        case quit
        case failed(SyncControlError)
        case ended
    }

    func run(_ updates: AsyncThrowingStream<ControlStatus, any Error>) async throws {
        let (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(16))
        let statusTask = Task {
            do {
                for try await status in updates { continuation.yield(.status(status)) }
                continuation.yield(.ended)
            } catch let error as SyncControlError {
                continuation.yield(.failed(error))
            } catch {
                continuation.yield(.failed(.remote(.init(name: "watch", text: String(describing: error)))))
            }
        }
        let tickTask = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.tick)
                continuation.yield(.tick)
            }
        }
        let signals = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
            source.setEventHandler { continuation.yield(.quit) }
            source.resume()
            return source
        }
        defer {
            statusTask.cancel()
            tickTask.cancel()
            signals.forEach { $0.cancel() }
        }

        let screen = Screen()
        screen.enter()
        defer { screen.leave() }
        let clock = ContinuousClock()
        let start = clock.now
        var latest: ControlStatus?
        var lastDrawn = clock.now - .seconds(10)
        for await event in events {
            switch event {
            case .status(let status):
                latest = status
            case .tick:
                // Static screens only need the relative times refreshed once a second.
                if !WatchFrame.isAnimated(latest, feed: feed) && clock.now - lastDrawn < .seconds(1) { continue }
            case .quit:
                return
            case .ended:
                screen.leave()
                FileHandle.standardError.write(Data("syncd closed the connection.\n".utf8))
                return
            case .failed(let error):
                screen.leave()
                throw error
            }
            let elapsed = clock.now - start
            let time = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let style = TerminalStyle.detect(environment: environment)
            screen.draw(WatchFrame.render(latest, feed: feed, time: time, now: Date(), style: style), height: style.height)
            lastDrawn = clock.now
        }
    }
}

/// The terminal's alternate screen, with the cursor hidden while drawing.
final class Screen {
    private var active = false

    func enter() {
        write("\u{1B}[?1049h\u{1B}[?25l")
        active = true
    }

    func leave() {
        guard active else { return }
        write("\u{1B}[?25h\u{1B}[?1049l")
        active = false
    }

    /// Redraws in place: home, each line cleared to its end, then the rest of the screen cleared.
    func draw(_ lines: [String], height: Int) {
        // No newline after the last line, so a full screen never scrolls.
        var out = "\u{1B}[H"
        out += lines.prefix(height).map { $0 + "\u{1B}[K" }.joined(separator: "\r\n")
        out += "\u{1B}[J"
        write(out)
    }

    private func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}
