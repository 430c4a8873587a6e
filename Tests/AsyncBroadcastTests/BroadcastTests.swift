import AsyncBroadcast
import Testing

struct BroadcastTests {
    @Test func newSubscribersGetTheLatestThenEveryLaterValue() async {
        let broadcast = Broadcast<Int>(bufferingNewest: 8)
        broadcast.publish(1)
        broadcast.publish(2)
        let stream = broadcast.subscribe()
        broadcast.publish(3)
        broadcast.finish()
        var seen: [Int] = []
        for await value in stream { seen.append(value) }
        #expect(seen == [2, 3])
    }

    @Test func replayReplacesTheLatest() async {
        let broadcast = Broadcast<Int>(bufferingNewest: 8, latest: 0)
        let stream = broadcast.subscribe(replaying: [7, 8])
        broadcast.publish(9)
        broadcast.finish()
        var seen: [Int] = []
        for await value in stream { seen.append(value) }
        #expect(seen == [7, 8, 9])
    }

    @Test func aStalledSubscriberKeepsOnlyTheNewest() async {
        let broadcast = Broadcast<Int>(bufferingNewest: 2)
        let stream = broadcast.subscribe()
        for value in 1...100 { broadcast.publish(value) }
        broadcast.finish()
        var seen: [Int] = []
        for await value in stream { seen.append(value) }
        #expect(seen == [99, 100])
    }

    @Test func publishIfChangedSkipsEqualValues() {
        let broadcast = Broadcast<String>(bufferingNewest: 1, latest: "a")
        #expect(!broadcast.publishIfChanged("a"))
        #expect(broadcast.publishIfChanged("b"))
        #expect(broadcast.latest == "b")
    }

    @Test func finishEndsStreamsAndLaterSubscriptions() async {
        let broadcast = Broadcast<Int>(bufferingNewest: 1)
        let before = broadcast.subscribe()
        #expect(broadcast.subscriberCount == 1)
        broadcast.finish()
        broadcast.publish(1)
        var iterator = before.makeAsyncIterator()
        #expect(await iterator.next() == nil)
        var after = broadcast.subscribe().makeAsyncIterator()
        #expect(await after.next() == nil)
        #expect(broadcast.subscriberCount == 0)
    }

    @Test func droppingAStreamUnsubscribes() async {
        let broadcast = Broadcast<Int>(bufferingNewest: 1)
        do {
            let stream = broadcast.subscribe()
            _ = stream
        }
        // onTermination runs when the stream's last reference goes away.
        #expect(broadcast.subscriberCount == 0)
    }

    /// Publishers on several threads: every subscriber sees one and the same order.
    @Test func concurrentPublishersGiveEverySubscriberTheSameOrder() async {
        let broadcast = Broadcast<Int>(bufferingNewest: 10_000)
        let a = broadcast.subscribe(), b = broadcast.subscribe()
        await withTaskGroup(of: Void.self) { group in
            for base in 0..<4 {
                group.addTask { for i in 0..<500 { broadcast.publish(base * 1000 + i) } }
            }
        }
        broadcast.finish()
        var first: [Int] = [], second: [Int] = []
        for await value in a { first.append(value) }
        for await value in b { second.append(value) }
        #expect(first.count == 2000)
        #expect(first == second)
    }
}
