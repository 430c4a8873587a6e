import Foundation
import Testing
@testable import SyncMetrics

@Suite("Exposition format negotiation")
struct NegotiationTests {
    @Test func prometheusScrapeHeaderPrefersOpenMetrics() {
        // What Prometheus 2.42 sends with every scrape.
        let accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        #expect(ExpositionFormat.negotiate(accept: accept) == .openMetrics)
    }

    @Test func plainClientsGetTheTextFormat() {
        #expect(ExpositionFormat.negotiate(accept: nil) == .prometheusText)
        #expect(ExpositionFormat.negotiate(accept: "*/*") == .prometheusText)
        #expect(ExpositionFormat.negotiate(accept: "text/plain") == .prometheusText)
        #expect(ExpositionFormat.negotiate(accept: "text/plain;q=1, application/openmetrics-text;q=0.5") == .prometheusText)
        #expect(ExpositionFormat.negotiate(accept: "application/openmetrics-text;q=0") == .prometheusText)
        #expect(ExpositionFormat.negotiate(accept: "APPLICATION/OpenMetrics-Text ; q=0.9, text/plain;q=0.8") == .openMetrics)
    }
}
