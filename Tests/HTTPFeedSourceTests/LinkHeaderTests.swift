import Foundation
import HTTPFeedSource
import Testing

@Suite("RFC 8288 Link header parsing")
struct LinkHeaderTests {
    let base = URL(string: "https://social.example/api/v1/timelines/home?limit=20")!

    @Test("Mastodon's header: next and prev with absolute URLs")
    func mastodon() throws {
        let value = #"<https://social.example/api/v1/timelines/home?max_id=109>; rel="next", <https://social.example/api/v1/timelines/home?min_id=130>; rel="prev""#
        let links = LinkHeader.parse(value, base: base)
        #expect(LinkHeader.first("next", in: links)?.absoluteString == "https://social.example/api/v1/timelines/home?max_id=109")
        #expect(LinkHeader.first("prev", in: links)?.absoluteString == "https://social.example/api/v1/timelines/home?min_id=130")
    }

    @Test("GitHub's header: unquoted-free order, several relations, extra links")
    func github() {
        let value = #"<https://api.github.com/repositories/1/issues?page=2>; rel="next", <https://api.github.com/repositories/1/issues?page=5>; rel="last""#
        let links = LinkHeader.parse(value, base: base)
        #expect(links.count == 2)
        #expect(LinkHeader.first("next", in: links)?.absoluteString == "https://api.github.com/repositories/1/issues?page=2")
        #expect(LinkHeader.first("prev", in: links) == nil)
    }

    @Test("rel=\"previous\" (the HTML 4 spelling) is the newer link too; prev wins where both are given")
    func previous() {
        let spelled = LinkHeader.parse(#"<https://social.example/a?min_id=7>; rel="previous", <https://social.example/a?max_id=1>; rel="next""#, base: base)
        #expect(LinkHeader.previous(in: spelled)?.absoluteString == "https://social.example/a?min_id=7")
        #expect(LinkHeader.first("prev", in: spelled) == nil)
        let both = LinkHeader.parse(#"<https://social.example/a?min_id=8>; rel="prev previous""#, base: base)
        #expect(LinkHeader.previous(in: both)?.absoluteString == "https://social.example/a?min_id=8")
    }

    @Test("relative targets resolve against the request URL")
    func relative() {
        let links = LinkHeader.parse(#"</api/v1/timelines/home?max_id=5>; rel=next, <?min_id=9>; rel=prev"#, base: base)
        #expect(LinkHeader.first("next", in: links)?.absoluteString == "https://social.example/api/v1/timelines/home?max_id=5")
        #expect(LinkHeader.first("prev", in: links)?.absoluteString == "https://social.example/api/v1/timelines/home?min_id=9")
    }

    @Test("absolute targets are taken as they are, whatever the base; a scheme needs its colon")
    func absolute() {
        let other = URL(string: "http://elsewhere.example:8080/x/y?z=1")!
        for target in ["https://social.example/a?max_id=5", "HTTP://Social.Example:8443/p%20q?x=%C3%A9#f", "urn:x-feed:page:2", "h2+x.y-z://host/p"] {
            let links = LinkHeader.parse("<\(target)>; rel=next", base: other)
            #expect(LinkHeader.first("next", in: links)?.absoluteString == URL(string: target, relativeTo: other)?.absoluteURL.absoluteString)
        }
        // No scheme (a colon after a slash, or a leading digit): resolved against the base.
        #expect(LinkHeader.first("next", in: LinkHeader.parse("<a/b:c>; rel=next", base: other))?.absoluteString == "http://elsewhere.example:8080/x/a/b:c")
        #expect(LinkHeader.first("next", in: LinkHeader.parse("<./1x:y>; rel=next", base: other))?.absoluteString == "http://elsewhere.example:8080/x/1x:y")
        #expect(!LinkHeader.hasScheme("1http://a") && !LinkHeader.hasScheme("a/b:c") && !LinkHeader.hasScheme("http") && LinkHeader.hasScheme("a:"))
    }

    @Test("non-ASCII text in targets and quoted parameters passes through whole")
    func nonASCII() {
        let links = LinkHeader.parse(#"<https://a.example/caf%C3%A9>; rel="next"; title="café, \"☕\"; ok""#, base: base)
        #expect(links.count == 1)
        #expect(links.first?.parameters["title"] == "café, \"☕\"; ok")
    }

    @Test("quoted strings may hold commas and semicolons; rel lists several types; case is ignored")
    func quoting() {
        let value = #"<https://a.example/1>; title="older, really; yes"; REL="Next Alternate", <https://a.example/2>; rel="prev""#
        let links = LinkHeader.parse(value, base: base)
        #expect(links.count == 2)
        #expect(links[0].relations == ["next", "alternate"])
        #expect(links[0].parameters["title"] == "older, really; yes")
        #expect(LinkHeader.first("prev", in: links)?.absoluteString == "https://a.example/2")
    }

    @Test("only the first rel parameter counts (RFC 8288 §3.3)")
    func firstRelWins() {
        let links = LinkHeader.parse(#"<https://a.example/1>; rel="prev"; rel="next""#, base: base)
        #expect(LinkHeader.first("next", in: links) == nil)
        #expect(LinkHeader.first("prev", in: links) != nil)
    }

    @Test("garbage is skipped, not fatal; several header lines combine")
    func garbage() {
        #expect(LinkHeader.parse("", base: base).isEmpty)
        #expect(LinkHeader.parse("nonsense, more nonsense", base: base).isEmpty)
        let links = LinkHeader.parse(["junk \"quoted, comma\", <https://a.example/n>; rel=next", "<https://a.example/p>; rel=prev"], base: base)
        #expect(LinkHeader.first("next", in: links)?.absoluteString == "https://a.example/n")
        #expect(LinkHeader.first("prev", in: links)?.absoluteString == "https://a.example/p")
        #expect(LinkHeader.parse("<https://a.example/unterminated; rel=next", base: base).isEmpty)
    }
}
