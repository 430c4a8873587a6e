import NIOCore
import NIOHTTP1

/// What has been read of one response, and the answer it makes.
struct PageWalkResponse {
    var head: HTTPResponseHead?
    var links: [WebLink] = []
    var body = ByteBuffer()
    /// Body bytes read, kept or not (after content decoding).
    var bodyBytesRead = 0
    /// Why the response is refused (its body over the limit), once it is.
    var failure: (any Error)?

    /// Counts a part of the body and keeps it if the response is a success not refused;
    /// `false` when it takes the body over `limit`, and is not kept.
    mutating func read(_ part: inout ByteBuffer, limit: Int) -> Bool {
        bodyBytesRead += part.readableBytes
        guard let head, (200..<300).contains(head.status.code), failure == nil else { return true }
        guard body.readableBytes + part.readableBytes <= limit else { return false }
        body.writeBuffer(&part)
        return true
    }

    /// The caller's answer: a page, a redirect to follow through the pool, or the error the
    /// pool's request would have thrown.
    func answer(label: RequestLabel) -> Result<PageWalk.Answer, any Error> {
        if let failure { return .failure(failure) }
        guard let head else { return .failure(ChannelError.ioOnClosedChannel) }
        switch head.status.code {
        case 200..<300: return .success(.page(body, links: links, headers: head.headers))
        case 300..<400: return .success(.redirect)
        default: return .failure(HTTPFeedSource.statusError(head.status, head.headers, label: label))
        }
    }
}
