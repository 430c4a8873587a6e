import Hummingbird

/// The `/admin` endpoints: grow, delete and edit feed items, read request counters, and those of
/// the request hook (``FeedRequestHook/adminRoutes()``).
///
/// They answer only peers on this host, so a server bound to a public address for a demo still
/// cannot be steered from outside.
struct AdminHandler: Sendable {
    let state: FeedServerState
    let hook: (any FeedRequestHook)?

    func register(on router: Router<FeedRequestContext>) {
        let admin = router.group("admin")
        admin.get("feeds") { _, context in try await guarded(context) { await feedList() } }
        admin.get("feeds/:name") { _, context in
            try await guarded(context) { try await feedSummary(context.parameters.require("name")) }
        }
        admin.post("feeds/:name/items") { request, context in
            try await guarded(context) {
                let name = try context.parameters.require("name")
                let count = try AdminRoute.positiveInteger(parameters(request), "count", default: 1)
                let total = try await state.append(feed: name, count: count)
                return ok("{\"feed\":\(jsonString(name)),\"count\":\(total)}")
            }
        }
        // Users deleting and editing posts: ids=a,b (the items below a deleted one move up).
        for action in ["delete", "edit"] {
            admin.post("feeds/:name/\(action)") { request, context in
                try await guarded(context) {
                    let name = try context.parameters.require("name")
                    guard let list = request.uri.queryParameters["ids"], !list.isEmpty else {
                        throw DemoFeedServerError.invalidArgument("missing ids=ID[,ID…]")
                    }
                    let ids = list.split(separator: ",").map(String.init)
                    let changed = action == "delete" ? try await state.delete(feed: name, ids: ids) : try await state.edit(feed: name, ids: ids)
                    return ok("{\"feed\":\(jsonString(name)),\"\(action == "delete" ? "deleted" : "edited")\":\(changed)}")
                }
            }
        }
        admin.get("feeds/:name/requests") { _, context in
            try await guarded(context) {
                let name = try context.parameters.require("name")
                let records = await state.requests(feed: name)
                let rows = records.map { record in
                    "{\"kind\":\"\(record.kind.rawValue)\",\"query\":\(jsonString(record.query)),"
                        + "\"fault\":\(record.intervention.map(jsonString) ?? "null")}"
                }
                return ok("{\"feed\":\(jsonString(name)),\"count\":\(records.count),\"requests\":[\(rows.joined(separator: ","))]}")
            }
        }
        admin.delete("requests") { _, context in
            try await guarded(context) {
                await state.resetRequestLog()
                return ok("{}")
            }
        }
        for route in hook?.adminRoutes() ?? [] {
            let handler: @Sendable (Request, FeedRequestContext) async throws -> Response = { request, context in
                try await guarded(context) { ok(try await route.handle(parameters(request))) }
            }
            switch route.method {
            case .get: admin.get(RouterPath(route.path), use: handler)
            case .post: admin.post(RouterPath(route.path), use: handler)
            case .delete: admin.delete(RouterPath(route.path), use: handler)
            }
        }
    }

    private func feedList() async -> Response {
        var rows: [String] = []
        for name in await state.feedNames { rows.append(await summaryJSON(name)) }
        return ok("[\(rows.joined(separator: ","))]")
    }

    private func feedSummary(_ name: String) async throws -> Response {
        guard await state.definition(name) != nil else { throw DemoFeedServerError.unknownFeed(name) }
        return ok(await summaryJSON(name))
    }

    private func summaryJSON(_ name: String) async -> String {
        let items = (try? await state.items(feed: name)) ?? []
        let requests = await state.requestCount(feed: name)
        return "{\"name\":\(jsonString(name)),\"count\":\(items.count),"
            + "\"newest_id\":\(items.last.map { jsonString($0.id) } ?? "null"),"
            + "\"oldest_id\":\(items.first.map { jsonString($0.id) } ?? "null"),"
            + "\"requests\":\(requests),\"stalled\":\(await hook?.heldRequestCount() ?? 0)}"
    }

    private func guarded(_ context: FeedRequestContext, _ body: () async throws -> Response) async throws -> Response {
        guard context.isLoopbackPeer else {
            return FeedHandler.json(.forbidden, PageBody.error("admin endpoints answer loopback peers only"))
        }
        do {
            return try await body()
        } catch let error as DemoFeedServerError {
            if case .unknownFeed = error { return FeedHandler.json(.notFound, PageBody.error(error.description)) }
            return FeedHandler.json(.badRequest, PageBody.error(error.description))
        }
    }

    /// The query's parameters, the first of a repeated one (as Hummingbird's lookup gives it).
    private func parameters(_ request: Request) -> [String: String] {
        var parameters: [String: String] = [:]
        for (key, value) in request.uri.queryParameters where parameters[String(key)] == nil {
            parameters[String(key)] = String(value)
        }
        return parameters
    }

    private func ok(_ json: String) -> Response { FeedHandler.json(.ok, Array((json + "\n").utf8)) }
}
