import Foundation
import SyncCore

#if canImport(FoundationXML)
import FoundationXML
#endif

/// What a syndication document (Atom or RSS) gave: everything a page walk needs from one body,
/// built only after the whole body parsed, so a caller never sees part of a page.
struct SyndicationPage: Sendable {
    /// Which of the two formats the body was; they differ in what an entry's version is.
    enum Format: String, Sendable {
        /// Atom 1.0 (RFC 4287): `<feed xmlns="http://www.w3.org/2005/Atom">`.
        case atom
        /// RSS 2.0: `<rss version="2.0"><channel>`.
        case rss
    }

    /// The body's format, for messages and for callers that treat the two differently.
    var format: Format
    /// Entries in document order (servers send newest first), each with its id and a JSON
    /// payload of fixed member order, so identical bodies store identical bytes.
    /// Each item's version is Atom's `<updated>`; RSS has no version element, so a changed RSS
    /// item is seen by its payload only.
    var items: [FeedItem]
    /// The document's own links (feed or channel level, never an entry's), targets resolved
    /// against the request URL and `xml:base`: where RFC 5005 paging (`next`, `previous`,
    /// `first`, `last`, `prev-archive`, `next-archive`, `current`) continues.
    var links: [WebLink]
    /// The ids of entries the feed says were deleted (RFC 6721 `<at:deleted-entry ref="…">`).
    var deletedIDs: [String] = []
}

/// Reads Atom 1.0 and RSS 2.0 pages into items, with the same contract as the JSON parser: the
/// whole body is checked before anything is returned, and every failure is `.malformed` with a
/// message that says what and where.
///
/// The XML itself is read by Foundation's `XMLParser` (libxml2). Entities are never loaded:
/// a document type with an internal subset is refused before libxml2 sees it, because on Linux
/// `XMLParser` reports no entity declarations to its delegate (it never calls
/// `foundInternalEntityDeclaration…`) and drops references to declared entities silently. `XMLParser` on Linux runs libxml2 in recover mode and reports a truncated document as
/// a success with an error on the side, so any reported error fails the page here.
enum SyndicationParser {
    /// Atom 1.0's namespace (RFC 4287 §2); Atom elements outside it are not Atom.
    static let atomNamespace = "http://www.w3.org/2005/Atom"
    /// RFC 6721's namespace, of `<at:deleted-entry>`.
    static let tombstonesNamespace = "http://purl.org/atompub/tombstones/1.0"
    /// The RSS content module's namespace, home of `<content:encoded>` (an item's full text).
    static let contentNamespace = "http://purl.org/rss/1.0/modules/content/"
    /// Dublin Core's namespace, home of `<dc:creator>`, which RSS feeds use for authors.
    static let dublinCoreNamespace = "http://purl.org/dc/elements/1.1/"
    /// RDF's namespace: its `<rdf:RDF>` root marks RSS 1.0, which is refused by name.
    static let rdfNamespace = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
    /// How much character data one document may hold (64 MiB): a bound on what the parse
    /// collects, whatever the body limit in front of it.
    static let maxTextBytes = 64 << 20

    /// Whether `body` looks like an Atom or RSS document, to route it here instead of to the JSON
    /// parser: after an optional BOM, white space, XML declaration, comments, processing
    /// instructions and document type, the root is `<feed>` naming the Atom namespace, `<rss>`,
    /// or `<rdf:RDF>` (RSS 1.0, which `parse` then refuses with a message saying so).
    static func looksLikeSyndication(_ body: Data) -> Bool {
        let bytes = [UInt8](body)
        let prolog = Prolog(bytes)
        guard let root = prolog.rootStart else { return false }
        var scanner = TagScanner(bytes: bytes, index: root)
        guard let tag = scanner.startTag() else { return false }
        let name = tag.name
        let local = name.split(separator: ":").last.map(String.init) ?? name
        if name == "rss" { return true }
        if local == "RDF" { return true }
        if local == "feed" {
            let text = String(decoding: bytes[tag.range], as: UTF8.self)
            return text.contains(atomNamespace)
        }
        return false
    }

    /// Parses the whole document into a page; throws `FeedError(.malformed, "malformed page: …")`
    /// for anything that is not a well-formed Atom 1.0 (RFC 4287) or RSS 2.0 document, never
    /// returning part of one. `url` is the request URL, the base for relative links; elements
    /// nested deeper than `maxDepth` and more than `maxTextBytes` of character data are refused,
    /// bounding what a hostile body can cost.
    static func parse(_ body: Data, url: URL, maxDepth: Int = 64, maxTextBytes: Int = SyndicationParser.maxTextBytes) throws(FeedError) -> SyndicationPage {
        let bytes = [UInt8](body)
        try checkEncoding(bytes)
        let prolog = Prolog(bytes)
        if let subset = prolog.internalSubset {
            if contains(bytes[subset], Array("<!ENTITY".utf8)) {
                throw malformed("the document declares entities, which are not read")
            }
            throw malformed("the document has an internal DTD subset, which is not read")
        }

        let reader = DocumentReader(base: url, maxDepth: maxDepth, maxTextBytes: maxTextBytes)
        let parser = XMLParser(data: body)
        parser.shouldProcessNamespaces = true
        parser.shouldReportNamespacePrefixes = false
        parser.shouldResolveExternalEntities = false
        parser.externalEntityResolvingPolicy = .never
        parser.delegate = reader
        _ = parser.parse()
        parser.delegate = nil
        let document = try reader.result(bodyIsBlank: bytes.allSatisfy(isXMLSpace))

        let originals = try locate(document.entries.map(\.ordinal), qualifiedNames: document.entries.map(\.qualifiedName),
                                   elementCount: document.elementCount, in: bytes)
        var ids = DistinctIDs()
        var items: [FeedItem] = []
        items.reserveCapacity(document.entries.count)
        for (index, entry) in document.entries.enumerated() {
            let id = try entry.id(format: document.format, position: index + 1)
            guard ids.insert(id) else { throw malformed("id \"\(id)\" appears twice in one page") }
            let original = String(decoding: bytes[originals[index]], as: UTF8.self)
            items.append(FeedItem(id: id, payload: entry.payload(id: id, original: original), version: document.format == .atom ? entry.updated : nil))
        }
        return SyndicationPage(format: document.format, items: items, links: document.links, deletedIDs: document.deletedIDs)
    }

    /// A `.malformed` failure worded as the JSON parser's are, so logs read alike.
    static func malformed(_ message: String) -> FeedError {
        FeedError(.malformed, "malformed page: \(message)")
    }

    /// Refuses bodies whose entries could not be kept as UTF-8 text: each entry's original
    /// bytes go into a JSON string as they are, so they must already be UTF-8. A declared
    /// legacy encoding is fine while the body is ASCII, which reads the same in either.
    private static func checkEncoding(_ bytes: [UInt8]) throws(FeedError) {
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) || bytes.first == 0 || (bytes.count > 1 && bytes[1] == 0) {
            throw malformed("the body is UTF-16 or UTF-32; syncd reads UTF-8 Atom and RSS only")
        }
        let isASCII = bytes.allSatisfy { $0 < 0x80 }
        if !isASCII, let declared = Prolog.declaredEncoding(bytes) {
            let name = declared.lowercased()
            guard name == "utf-8" || name == "utf8" else {
                throw malformed("the document is encoded in \(declared); syncd reads UTF-8 Atom and RSS only")
            }
        }
        guard isASCII || String(validating: bytes, as: UTF8.self) != nil else {
            throw malformed("the body is not valid UTF-8")
        }
    }

    /// Where each wanted element lies in the body, from `<` of its start tag to `>` of its end
    /// tag. `XMLParser`'s line and column cannot give byte offsets (columns count characters,
    /// a lone CR starts no line), so the body, known well-formed by now, is walked tag by tag
    /// and elements are matched by their order of appearance; the count and names must agree
    /// with what `XMLParser` saw, or the page is refused rather than cut wrongly.
    private static func locate(_ ordinals: [Int], qualifiedNames: [String], elementCount: Int, in bytes: [UInt8]) throws(FeedError) -> [Range<Int>] {
        guard !ordinals.isEmpty else { return [] }
        var wanted: [Int: Int] = [:]
        for (index, ordinal) in ordinals.enumerated() { wanted[ordinal] = index }
        var starts = [Int](repeating: -1, count: ordinals.count)
        var ranges = [Range<Int>?](repeating: nil, count: ordinals.count)
        var open: [Int] = []
        var ordinal = 0
        var scanner = TagScanner(bytes: bytes, index: 0)
        let cannot = malformed("could not locate the entries' text in the body")
        while let event = scanner.next() {
            switch event {
            case .start(let name, let range, let selfClosing):
                if let index = wanted[ordinal] {
                    guard name == qualifiedNames[index] else { throw cannot }
                    starts[index] = range.lowerBound
                    if selfClosing { ranges[index] = range }
                }
                if !selfClosing { open.append(ordinal) }
                ordinal += 1
            case .end(let range):
                guard let closed = open.popLast() else { throw cannot }
                if let index = wanted[closed] { ranges[index] = starts[index]..<range.upperBound }
            }
        }
        guard ordinal == elementCount, open.isEmpty else { throw cannot }
        var found: [Range<Int>] = []
        for range in ranges {
            guard let range else { throw cannot }
            found.append(range)
        }
        return found
    }

    /// Whether `haystack` holds `needle` as a run of bytes.
    private static func contains(_ haystack: ArraySlice<UInt8>, _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        var index = haystack.startIndex
        while index + needle.count <= haystack.endIndex {
            if haystack[index..<(index + needle.count)].elementsEqual(needle) { return true }
            index += 1
        }
        return false
    }

    /// XML's white space (§2.3): the only characters trimmed from text values, so a value that
    /// starts with a no-break space keeps it.
    static func isXMLSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// Where the first byte from `start` on that `isStop` takes stands outside a quoted value
    /// ('…' or "…"), where markup's `>` and a document type's `[` mean nothing; `nil` if none.
    static func firstUnquoted(in bytes: [UInt8], from start: Int, where isStop: (UInt8) -> Bool) -> Int? {
        var quote: UInt8?
        for at in start..<max(start, bytes.count) {
            let byte = bytes[at]
            if let open = quote {
                if byte == open { quote = nil }
            } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                quote = byte
            } else if isStop(byte) {
                return at
            }
        }
        return nil
    }

    /// `text` without leading and trailing XML white space.
    static func trimmed(_ text: String) -> String {
        let scalars = text.unicodeScalars
        let isSpace: (Unicode.Scalar) -> Bool = { $0.value < 0x80 && isXMLSpace(UInt8($0.value)) }
        guard let first = scalars.firstIndex(where: { !isSpace($0) }), let last = scalars.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(scalars[first...last])
    }

    /// `reference` resolved against `base`, as `LinkHeader` resolves `Link` targets; `nil` when
    /// it is no URL at all.
    static func resolve(_ reference: String, against base: URL) -> URL? {
        if LinkHeader.hasScheme(reference) { return URL(string: reference) }
        return URL(string: reference, relativeTo: base)?.absoluteURL
    }
}

// MARK: - The document as XMLParser reports it

/// One entry (Atom `<entry>`, RSS `<item>`) as read, before it is checked and encoded.
private struct EntryDraft {
    /// The entry's position among all elements in document order, to find its bytes.
    var ordinal: Int
    /// The entry's tag as written (`entry`, `atom:entry`, `item`), to check the byte walk.
    var qualifiedName: String
    /// The line its start tag ended on, for messages.
    var line: Int
    /// Atom `<id>`.
    var atomID: String?
    /// RSS `<guid>`.
    var guid: String?
    /// `<title>`'s text (markup of an HTML or XHTML title left as text or dropped, respectively).
    var title: String?
    /// Atom: the first `rel="alternate"` (or rel-less) link's target, resolved like the
    /// document's links; RSS: `<link>` as written, since it may also be the item's id.
    var link: String?
    /// Atom `<published>`, RSS `<pubDate>`, as written: dates are the consumer's to read.
    var published: String?
    /// Atom `<updated>`, also the entry's version.
    var updated: String?
    /// Atom `<summary>`, RSS `<description>`.
    var summary: String?
    /// Atom inline `<content>`'s text, RSS `<content:encoded>`.
    var content: String?
    /// Atom `<author><name>`s; RSS `<author>`s and `<dc:creator>`s, in document order.
    var authors: [String] = []

    /// The entry's id by its format's rule; an entry without one fails the page, naming the entry.
    func id(format: SyndicationPage.Format, position: Int) throws(FeedError) -> String {
        switch format {
        case .atom:
            guard let atomID else { throw SyndicationParser.malformed("entry \(position) (line \(line)) has no <id>") }
            guard !atomID.isEmpty else { throw SyndicationParser.malformed("entry \(position) (line \(line)) has an empty <id>") }
            return atomID
        case .rss:
            if let guid, !guid.isEmpty { return guid }
            if let link, !link.isEmpty { return link }
            throw SyndicationParser.malformed("item \(position) has neither guid nor link")
        }
    }

    /// The payload: a JSON object with members in a fixed order, absent members left out,
    /// encoded here rather than by `JSONSerialization` so equal documents give equal bytes.
    func payload(id: String, original: String) -> Data {
        var json = JSONWriter()
        json.member("id", id)
        if let title { json.member("title", title) }
        if let link { json.member("link", link) }
        if let published { json.member("published", published) }
        if let updated { json.member("updated", updated) }
        if let summary { json.member("summary", summary) }
        if let content { json.member("content", content) }
        if !authors.isEmpty { json.member("authors", authors) }
        json.member("original", original)
        return json.finish()
    }
}

/// A minimal JSON object writer: members in call order, strings escaped one fixed way
/// (`"`, `\` and control characters; everything else as UTF-8), for byte-stable payloads.
private struct JSONWriter {
    /// The object so far, open.
    private var bytes: [UInt8] = [UInt8(ascii: "{")]
    /// Whether no member is written yet (no comma before the next).
    private var first = true

    /// Appends `"name":"value"`.
    mutating func member(_ name: String, _ value: String) {
        key(name)
        string(value)
    }

    /// Appends `"name":["a","b"]`.
    mutating func member(_ name: String, _ values: [String]) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// The finished object.
    mutating func finish() -> Data {
        bytes.append(UInt8(ascii: "}"))
        return Data(bytes)
    }

    /// Appends `"name":`, after a comma unless it is the first member.
    private mutating func key(_ name: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Appends `text` as a JSON string: `\"`, `\\`, `\u00XX` for control characters, the rest
    /// as its UTF-8, so one text has one encoding.
    private mutating func string(_ text: String) {
        let hex = Array("0123456789abcdef".utf8)
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case 0..<0x20:
                bytes.append(contentsOf: Array("\\u00".utf8))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xF)])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// What the delegate gathered from a parse that completed without an error.
private struct ReadDocument {
    /// Which format the root announced.
    var format: SyndicationPage.Format
    /// The entries in document order, not yet checked for ids.
    var entries: [EntryDraft]
    /// The feed- or channel-level links.
    var links: [WebLink]
    /// The `ref`s of the feed's `<at:deleted-entry>` elements.
    var deletedIDs: [String]
    /// How many elements the document has, to check the byte walk against.
    var elementCount: Int
}

/// The `XMLParser` delegate: follows the element tree and keeps what the page needs. The
/// first problem it meets (an XML error, a wrong root, too deep, too much text) ends the parse
/// and is the page's failure; it never outlives the synchronous `parse` call that made it.
private final class DocumentReader: NSObject, XMLParserDelegate {
    /// An open element: its name and namespace, and the base URL `xml:base` makes for it.
    private struct Frame {
        /// The namespace name (`""` for none): what tells Atom's `<link>` from RSS's.
        var namespace: String
        /// The local name.
        var name: String
        /// The name as written, prefix included, for messages and the byte walk.
        var qualifiedName: String
        /// What relative references in and under this element resolve against.
        var base: URL
    }

    /// Which entry field the character data under way belongs to.
    private enum Field { case atomID, guid, title, link, published, updated, summary, content, author }

    /// Deeper elements fail the page.
    private let maxDepth: Int
    /// More character data than this fails the page.
    private let maxTextBytes: Int
    /// The request URL, the base of the root element.
    private let documentBase: URL
    /// The open elements, root first.
    private var stack: [Frame] = []
    /// Start tags seen so far: the next element's ordinal.
    private var elementCount = 0
    /// Character data seen so far, in UTF-8 bytes, whether kept or not.
    private var textBytes = 0
    /// Set by an accepted root; `nil` until then.
    private var format: SyndicationPage.Format?
    /// Whether the root's end tag was seen: a body without it is truncated.
    private var rootClosed = false
    /// RSS `<channel>`s seen: exactly one is allowed.
    private var channels = 0
    /// Finished entries, in document order.
    private var entries: [EntryDraft] = []
    /// The entry being read, if inside one.
    private var entry: EntryDraft?
    /// The depth of `entry`'s element.
    private var entryDepth = 0
    /// The field whose text is being gathered, the depth of its element, and the text so far.
    private var capture: (field: Field, depth: Int, text: String)?
    /// Feed- or channel-level links, in document order.
    private var links: [WebLink] = []
    /// The `ref`s of the feed's tombstones, in document order.
    private var deletedIDs: [String] = []
    /// The first non-XML failure (shape, depth, size), which ends the parse.
    private var failure: String?
    /// The first XML error libxml2 reported: its code, line and the innermost open element.
    private var xmlError: (code: Int, line: Int, element: String?)?

    /// A reader for a body fetched from `base`, with the parse's bounds.
    init(base: URL, maxDepth: Int, maxTextBytes: Int) {
        self.documentBase = base
        self.maxDepth = maxDepth
        self.maxTextBytes = maxTextBytes
    }

    /// The document, or the first failure as a `FeedError`.
    func result(bodyIsBlank: Bool) throws(FeedError) -> ReadDocument {
        if let failure { throw SyndicationParser.malformed(failure) }
        if let xmlError {
            let place = xmlError.element.map { " (in <\($0)>)" } ?? ""
            throw SyndicationParser.malformed("not well-formed XML at line \(xmlError.line)\(place): \(Self.describe(xmlError.code, rootOpen: format != nil && !rootClosed)) (libxml2 error \(xmlError.code))")
        }
        guard let format else {
            throw SyndicationParser.malformed(bodyIsBlank ? "the body is empty" : "not well-formed XML: no root element")
        }
        guard rootClosed else { throw SyndicationParser.malformed("not well-formed XML: the document ends before its root element closes") }
        if format == .rss, channels == 0 { throw SyndicationParser.malformed("the <rss> element has no <channel>") }
        return ReadDocument(format: format, entries: entries, links: links, deletedIDs: deletedIDs, elementCount: elementCount)
    }

    /// Records the first failure and stops libxml2, so a hostile body costs no more than it took to see.
    private func fail(_ parser: XMLParser, _ message: String) {
        guard failure == nil, xmlError == nil else { return }
        failure = message
        parser.abortParsing()
    }

    /// Whether the parse has failed: later callbacks (libxml2 may still deliver some) are ignored.
    private var stopped: Bool { failure != nil || xmlError != nil }

    // MARK: Elements

    /// Tracks depth, bases and ordinals; decides the format at the root; opens entries and
    /// their fields; collects document links.
    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName qName: String?, attributes: [String: String]) {
        guard !stopped else { return }
        let namespace = namespaceURI ?? ""
        let qualified = qName ?? elementName
        let parentBase = stack.last?.base ?? documentBase
        let base = attributes["xml:base"].flatMap { SyndicationParser.resolve(SyndicationParser.trimmed($0), against: parentBase) } ?? parentBase
        let ordinal = elementCount
        elementCount += 1
        let depth = stack.count + 1
        guard depth <= maxDepth else {
            return fail(parser, "elements nest deeper than \(maxDepth) at line \(parser.lineNumber) (<\(qualified)>)")
        }
        guard !rootClosed else { return }
        let frame = Frame(namespace: namespace, name: elementName, qualifiedName: qualified, base: base)
        stack.append(frame)

        if depth == 1 { return root(parser, frame, attributes: attributes) }
        guard let format else { return }

        if entry != nil {
            entryChild(parser, frame, depth: depth, attributes: attributes)
            return
        }
        let parent = stack[stack.count - 2]
        switch format {
        case .atom:
            guard depth == 2 else { return }
            if elementName == "entry" {
                guard namespace == SyndicationParser.atomNamespace else {
                    return fail(parser, "<\(qualified)> at line \(parser.lineNumber) is \(Self.namespaceText(namespace)), not Atom's (\(SyndicationParser.atomNamespace))")
                }
                begin(ordinal: ordinal, qualifiedName: qualified, depth: depth, line: parser.lineNumber)
            } else if elementName == "link", namespace == SyndicationParser.atomNamespace {
                addLink(attributes, base: base)
            } else if elementName == "deleted-entry", namespace == SyndicationParser.tombstonesNamespace {
                // RFC 6721 §2.1: `ref` is the deleted entry's atom:id, which is its id here too.
                if let ref = attributes["ref"].map(SyndicationParser.trimmed), !ref.isEmpty { deletedIDs.append(ref) }
            }
        case .rss:
            if depth == 2 {
                guard elementName == "channel", namespace.isEmpty else { return }
                channels += 1
                if channels > 1 { fail(parser, "the <rss> element has more than one <channel> (line \(parser.lineNumber))") }
            } else if depth == 3, parent.name == "channel", parent.namespace.isEmpty {
                if elementName == "item" {
                    guard namespace.isEmpty else {
                        return fail(parser, "<\(qualified)> at line \(parser.lineNumber) is \(Self.namespaceText(namespace)); RSS 2.0 items have none")
                    }
                    begin(ordinal: ordinal, qualifiedName: qualified, depth: depth, line: parser.lineNumber)
                } else if elementName == "link", namespace == SyndicationParser.atomNamespace {
                    addLink(attributes, base: base)
                }
            }
        }
    }

    /// Decides the format from the root, refusing every other root with a message naming it.
    private func root(_ parser: XMLParser, _ frame: Frame, attributes: [String: String]) {
        let atom = SyndicationParser.atomNamespace
        switch (frame.name, frame.namespace) {
        case ("feed", atom):
            format = .atom
        case ("feed", ""):
            fail(parser, "the root <feed> has no namespace; an Atom 1.0 feed declares xmlns=\"\(atom)\"")
        case ("feed", let other):
            fail(parser, "the root <\(frame.qualifiedName)> is in namespace \(other), not Atom 1.0's (\(atom))")
        case ("entry", atom):
            fail(parser, "the document is a single Atom entry, not a feed")
        case ("rss", ""):
            let version = SyndicationParser.trimmed(attributes["version"] ?? "")
            guard version == "2.0" else {
                return fail(parser, version.isEmpty ? "the <rss> element has no version; syncd reads RSS 2.0" : "the document is RSS \(version); syncd reads RSS 2.0")
            }
            format = .rss
        case ("rss", let other):
            fail(parser, "the root <\(frame.qualifiedName)> is in namespace \(other); RSS 2.0 elements have no namespace")
        case ("RDF", SyndicationParser.rdfNamespace):
            fail(parser, "the document is RSS 1.0 (RDF), which syncd does not read; it reads Atom 1.0 and RSS 2.0")
        case ("html", _):
            fail(parser, "the root element is <\(frame.qualifiedName)> (an HTML page?), not an Atom <feed> or RSS <rss>")
        default:
            fail(parser, "the root element is <\(frame.qualifiedName)>, not an Atom <feed> or RSS <rss>")
        }
    }

    /// Opens an entry at `depth`.
    private func begin(ordinal: Int, qualifiedName: String, depth: Int, line: Int) {
        entry = EntryDraft(ordinal: ordinal, qualifiedName: qualifiedName, line: line)
        entryDepth = depth
    }

    /// Starts collecting text for the entry's fields: its direct children, and an Atom author's name.
    private func entryChild(_ parser: XMLParser, _ frame: Frame, depth: Int, attributes: [String: String]) {
        guard capture == nil, let format else { return }
        let namespace = frame.namespace
        if depth == entryDepth + 2 {
            let parent = stack[stack.count - 2]
            if format == .atom, frame.name == "name", namespace == SyndicationParser.atomNamespace,
               parent.name == "author", parent.namespace == SyndicationParser.atomNamespace {
                capture = (.author, depth, "")
            }
            return
        }
        guard depth == entryDepth + 1 else { return }
        let field: Field?
        switch format {
        case .atom:
            guard namespace == SyndicationParser.atomNamespace else { return }
            switch frame.name {
            case "id": field = .atomID
            case "title": field = .title
            case "published": field = .published
            case "updated": field = .updated
            case "summary": field = .summary
            // Out-of-line content (src=) has no text to keep.
            case "content": field = attributes["src"] == nil ? .content : nil
            case "link":
                let rel = SyndicationParser.trimmed(attributes["rel"] ?? "alternate")
                if entry?.link == nil, rel == "alternate" || rel == "http://www.iana.org/assignments/relation/alternate",
                   let href = attributes["href"] {
                    let reference = SyndicationParser.trimmed(href)
                    entry?.link = SyndicationParser.resolve(reference, against: frame.base)?.absoluteString ?? reference
                }
                field = nil
            default: field = nil
            }
        case .rss:
            switch (frame.name, namespace) {
            case ("guid", ""): field = .guid
            case ("link", ""): field = .link
            case ("title", ""): field = .title
            case ("pubDate", ""): field = .published
            case ("description", ""): field = .summary
            case ("author", ""), ("creator", SyndicationParser.dublinCoreNamespace): field = .author
            case ("encoded", SyndicationParser.contentNamespace): field = .content
            default: field = nil
            }
        }
        if let field { capture = (field, depth, "") }
    }

    /// A feed- or channel-level `<link>` as a `WebLink`; one with no usable `href` is skipped,
    /// as `LinkHeader` skips an unparseable link: the page stands without it.
    private func addLink(_ attributes: [String: String], base: URL) {
        guard let href = attributes["href"], let target = SyndicationParser.resolve(SyndicationParser.trimmed(href), against: base) else { return }
        var rel = SyndicationParser.trimmed(attributes["rel"] ?? "alternate")
        // RFC 4287 §4.2.7.2: the IANA registry's IRI form equals the short name.
        let iana = "http://www.iana.org/assignments/relation/"
        if rel.hasPrefix(iana) { rel.removeFirst(iana.count) }
        // Registered names are case-insensitive; extension relations are IRIs, compared as written.
        if !rel.contains(":") { rel = rel.lowercased() }
        var parameters: [String: String] = [:]
        for (key, value) in attributes where key != "href" && !key.hasPrefix("xml:") {
            parameters[key.lowercased()] = value
        }
        links.append(WebLink(target: target, relations: rel.isEmpty ? [] : [rel], parameters: parameters))
    }

    /// Closes fields (the first of a repeated field counts), entries and, finally, the root.
    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
        guard !stopped, !stack.isEmpty else { return }
        let depth = stack.count
        if let capture, capture.depth == depth {
            self.capture = nil
            let text = SyndicationParser.trimmed(capture.text)
            if var draft = entry {
                // The first of a repeated field counts; every author counts.
                switch capture.field {
                case .atomID: draft.atomID = draft.atomID ?? text
                case .guid: draft.guid = draft.guid ?? text
                case .title: draft.title = draft.title ?? text
                case .link: draft.link = draft.link ?? text
                case .published: draft.published = draft.published ?? text
                case .updated: draft.updated = draft.updated ?? text
                case .summary: draft.summary = draft.summary ?? text
                case .content: draft.content = draft.content ?? text
                case .author: if !text.isEmpty { draft.authors.append(text) }
                }
                entry = draft
            }
        }
        if let finished = entry, depth == entryDepth {
            entries.append(finished)
            entry = nil
        }
        stack.removeLast()
        if stack.isEmpty { rootClosed = true }
    }

    // MARK: Text

    /// Text, entities decoded by libxml2.
    func parser(_ parser: XMLParser, foundCharacters string: String) {
        text(parser, string)
    }

    /// A CDATA section: text like any other.
    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
        text(parser, String(decoding: CDATABlock, as: UTF8.self))
    }

    /// Counts all text against the bound and keeps what belongs to a field.
    private func text(_ parser: XMLParser, _ string: String) {
        guard !stopped else { return }
        textBytes += string.utf8.count
        guard textBytes <= maxTextBytes else {
            let limit = maxTextBytes >= 1 << 20 && maxTextBytes % (1 << 20) == 0 ? "\(maxTextBytes >> 20) MiB" : "\(maxTextBytes) bytes"
            return fail(parser, "the document holds more than \(limit) of text")
        }
        capture?.text += string
    }

    // MARK: Refusals

    /// Entity declarations refuse the body (Darwin reports them; Linux does not, see `parse`).
    func parser(_ parser: XMLParser, foundInternalEntityDeclarationWithName name: String, value: String?) {
        fail(parser, "the document declares entities, which are not read")
    }

    /// As for internal entities: nothing external is ever read.
    func parser(_ parser: XMLParser, foundExternalEntityDeclarationWithName name: String, publicID: String?, systemID: String?) {
        fail(parser, "the document declares entities, which are not read")
    }

    /// As for internal entities.
    func parser(_ parser: XMLParser, foundUnparsedEntityDeclarationWithName name: String, publicID: String?, systemID: String?, notationName: String?) {
        fail(parser, "the document declares entities, which are not read")
    }

    /// Never supplies an entity's text: on Linux whatever this returns is inserted as characters.
    func parser(_ parser: XMLParser, resolveExternalEntityName name: String, systemID: String?) -> Data? { nil }

    /// libxml2's warnings that leave the document's meaning intact (an unknown XML version, an
    /// odd `xml:lang` or `xml:space` value, a namespace name that is not an absolute URI);
    /// every other report, warnings that drop text included, fails the page.
    private static let harmlessWarnings: Set<Int> = [93, 97, 98, 99, 100, 102, 106]

    /// The first error that matters fails the page, whatever `parse()` returns afterwards.
    func parser(_ parser: XMLParser, parseErrorOccurred parseError: Error) {
        let code = (parseError as NSError).code
        guard !stopped, !Self.harmlessWarnings.contains(code) else { return }
        xmlError = (code, parser.lineNumber, stack.last?.qualifiedName)
        parser.abortParsing()
    }

    /// Validation is off; should a report come anyway, it counts as an error.
    func parser(_ parser: XMLParser, validationErrorOccurred validationError: Error) {
        self.parser(parser, parseErrorOccurred: validationError)
    }

    // MARK: Messages

    /// A namespace for a message.
    private static func namespaceText(_ namespace: String) -> String {
        namespace.isEmpty ? "in no namespace" : "in namespace \(namespace)"
    }

    /// A libxml2 error code (xmlerror.h) in words; `NSError` carries only the number on Linux.
    private static func describe(_ code: Int, rootOpen: Bool) -> String {
        switch code {
        case 2: "out of memory"
        case 3, 4: "no root element where the document should start"
        case 5: rootOpen ? "the document ends before its root element closes (truncated?)" : "content after the root element"
        case 6, 7, 8: "an invalid character reference"
        case 9: "a character XML does not allow (or bytes that are not UTF-8)"
        case 22, 23: "an '&' that starts no entity reference (write &amp;)"
        case 26, 27: "an undeclared entity (HTML names such as &nbsp; are not XML; write &#160;)"
        case 31, 32: "an unknown or unsupported encoding"
        case 33, 34, 39, 40, 41, 43, 44: "a malformed attribute value"
        case 38: "'<' inside an attribute value"
        case 42, 203: "an attribute given twice"
        case 45: "a comment that does not end"
        case 46, 47: "a processing instruction that does not end"
        case 56, 57: "a malformed XML declaration"
        case 61: "a document type declaration that does not end"
        case 63: "a CDATA section that does not end"
        case 64: "a processing instruction named xml after the start"
        case 65: "white space required"
        case 68: "a name was expected"
        case 73: "'>' expected"
        case 74: "'</' expected"
        case 76: "an end tag that does not match its start tag"
        case 77: "a tag that does not end"
        case 80: "'--' inside a comment"
        case 85: "elements not properly nested"
        case 86: "extra content"
        case 89: "an entity that refers to itself"
        case 96, 108, 109: "an unsupported XML version"
        case 110: "a name too long"
        case 201: "a prefix with no namespace declaration"
        case 202: "an invalid qualified name"
        default: "an XML error"
        }
    }
}

// MARK: - Byte scanning of a document already checked

/// What comes before the root element: the declared encoding, a document type's internal
/// subset (refused: it is where entities are declared), and where the root's start tag is.
/// Only the prolog's grammar is followed (XML §2.8: declaration, comments, processing
/// instructions, document type, white space); anything else ends the scan.
private struct Prolog {
    /// Where the root's `<` is, if the prolog ended in a start tag.
    var rootStart: Int?
    /// The bytes between a document type's `[` and `]`, if it has an internal subset.
    var internalSubset: Range<Int>?

    /// Scans `bytes`' prolog; on bytes that are not a prolog it stops, finding nothing, and
    /// libxml2 then says what is wrong.
    init(_ bytes: [UInt8]) {
        var index = 0
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        let count = bytes.count
        func has(_ text: String, at position: Int) -> Bool {
            let needle = Array(text.utf8)
            return position + needle.count <= count && bytes[position..<(position + needle.count)].elementsEqual(needle)
        }
        func find(_ text: String, from position: Int) -> Int? {
            let needle = Array(text.utf8)
            var at = position
            while at + needle.count <= count {
                if bytes[at..<(at + needle.count)].elementsEqual(needle) { return at }
                at += 1
            }
            return nil
        }
        while index < count {
            if SyndicationParser.isXMLSpace(bytes[index]) {
                index += 1
            } else if has("<?", at: index) {
                guard let end = find("?>", from: index + 2) else { return }
                index = end + 2
            } else if has("<!--", at: index) {
                guard let end = find("-->", from: index + 4) else { return }
                index = end + 3
            } else if has("<!DOCTYPE", at: index) {
                let stop = SyndicationParser.firstUnquoted(in: bytes, from: index + 9) { $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: ">") }
                if let stop, bytes[stop] == UInt8(ascii: "[") {
                    // The subset's end is not needed: its presence alone refuses the body.
                    let end = find("]", from: stop + 1) ?? count
                    internalSubset = (stop + 1)..<end
                    return
                }
                index = (stop ?? count) + 1
            } else if bytes[index] == UInt8(ascii: "<") {
                rootStart = index
                return
            } else {
                return
            }
        }
    }

    /// The encoding an XML declaration at the very start names, if any.
    static func declaredEncoding(_ bytes: [UInt8]) -> String? {
        var start = 0
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { start = 3 }
        guard bytes[start...].starts(with: Array("<?xml".utf8)) else { return nil }
        guard let end = bytes[start...].firstIndex(of: UInt8(ascii: ">")) else { return nil }
        let declaration = String(decoding: bytes[start..<end], as: UTF8.self)
        guard let name = declaration.range(of: "encoding") else { return nil }
        var rest = declaration[name.upperBound...].drop { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard rest.first == "=" else { return nil }
        rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let quote = rest.first, quote == "\"" || quote == "'" else { return nil }
        return String(rest.dropFirst().prefix { $0 != quote })
    }
}

/// Walks a body's tags in order, for a body libxml2 has already found well-formed (and without
/// an internal subset): text holds no `<`, attribute values hold no `<` but may hold `>`, and
/// comments, CDATA sections and processing instructions end at their first terminator. It is
/// not a tokenizer: it yields where tags are, and reads nothing else.
private struct TagScanner {
    /// A start tag (name as written, bytes from `<` to `>`) or an end tag.
    enum Event {
        /// A start tag; `selfClosing` for `<name/>`, which is its own end.
        case start(name: String, range: Range<Int>, selfClosing: Bool)
        /// An end tag `</name>`.
        case end(range: Range<Int>)
    }

    /// The body.
    let bytes: [UInt8]
    /// Where the walk is.
    var index: Int

    /// The next tag, skipping text, comments, CDATA, processing instructions and a document
    /// type; `nil` at the end or where the bytes stop making sense.
    mutating func next() -> Event? {
        while let open = bytes[index...].firstIndex(of: UInt8(ascii: "<")) {
            index = open
            if has("<?") {
                guard skip(past: "?>") else { return nil }
            } else if has("<!--") {
                guard skip(past: "-->") else { return nil }
            } else if has("<![CDATA[") {
                guard skip(past: "]]>") else { return nil }
            } else if has("<!") {
                guard skipQuoted() else { return nil }
            } else if has("</") {
                guard skipQuoted() else { return nil }
                return .end(range: open..<index)
            } else {
                guard let tag = startTag() else { return nil }
                return .start(name: tag.name, range: tag.range, selfClosing: tag.selfClosing)
            }
        }
        index = bytes.count
        return nil
    }

    /// The start tag at `index` (which is on its `<`): its name and extent.
    mutating func startTag() -> (name: String, range: Range<Int>, selfClosing: Bool)? {
        let open = index
        guard index < bytes.count, bytes[index] == UInt8(ascii: "<") else { return nil }
        var end = index + 1
        while end < bytes.count, !SyndicationParser.isXMLSpace(bytes[end]), bytes[end] != UInt8(ascii: ">"), bytes[end] != UInt8(ascii: "/") {
            end += 1
        }
        let name = String(decoding: bytes[(open + 1)..<end], as: UTF8.self)
        guard !name.isEmpty, skipQuoted() else { return nil }
        let selfClosing = bytes[index - 2] == UInt8(ascii: "/")
        return (name, open..<index, selfClosing)
    }

    /// Whether `text` starts at `index`.
    private func has(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        return text.withUTF8Buffer { bytes[index..<(index + count)].elementsEqual($0) }
    }

    /// Moves past the next `terminator`; `false` when there is none.
    private mutating func skip(past terminator: StaticString) -> Bool {
        let needle = terminator.withUTF8Buffer { Array($0) }
        var at = index + 1
        while at + needle.count <= bytes.count {
            if bytes[at] == needle[0], bytes[at..<(at + needle.count)].elementsEqual(needle) {
                index = at + needle.count
                return true
            }
            at += 1
        }
        return false
    }

    /// Moves past the `>` that ends the markup at `index`, stepping over quoted values.
    private mutating func skipQuoted() -> Bool {
        guard let end = SyndicationParser.firstUnquoted(in: bytes, from: index + 1, where: { $0 == UInt8(ascii: ">") }) else { return false }
        index = end + 1
        return true
    }
}
