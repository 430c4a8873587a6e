import ConnectivityPolicy
import LinkCost
import Testing

@Suite struct NetworkManagerMeteredTests {
    @Test func valuesAreNetworkManagersOwn() {
        // NMMetered in NetworkManager's nm-dbus-interface.h.
        #expect(NetworkManagerMetered(rawValue: 0) == .unknown)
        #expect(NetworkManagerMetered(rawValue: 1) == .yes)
        #expect(NetworkManagerMetered(rawValue: 2) == .no)
        #expect(NetworkManagerMetered(rawValue: 3) == .guessYes)
        #expect(NetworkManagerMetered(rawValue: 4) == .guessNo)
        #expect(NetworkManagerMetered(rawValue: 5) == nil)
    }

    @Test func guessesCountAsWhatTheyGuess() {
        #expect(NetworkManagerMetered.yes.cost == .metered)
        #expect(NetworkManagerMetered.guessYes.cost == .metered)
        #expect(NetworkManagerMetered.no.cost == .unmetered)
        #expect(NetworkManagerMetered.guessNo.cost == .unmetered)
        #expect(NetworkManagerMetered.unknown.cost == .unknown)
    }

    @Test func describedInNetworkManagersWords() {
        let words = [NetworkManagerMetered.unknown, .yes, .no, .guessYes, .guessNo].map(\.description)
        #expect(words == ["unknown", "yes", "no", "guess-yes", "guess-no"])
        #expect("Metered=\(NetworkManagerMetered.guessYes)" == "Metered=guess-yes")
    }
}
