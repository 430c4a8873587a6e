import Hummingbird

/// The `/admin` endpoints: grow feeds, script faults, read request counters.
///
/// They answer only peers on this host, so a server bound to a public address for a demo still
/// cannot be steered from outside.
struct AdminHandler: Sendable {
    let state: FeedServerState
    let gate: StallGate

    func register(on router: Router<FeedRequestContext>) {
        let admin = router.group("admin")
        admin.get("feeds") { _, context in try await guarded(context) { await feedList() } }
        admin.get("feeds/:name") { _, context in
            try await guarded(context) { try await feedSummary(context.parameters.require("name")) }
        }
        admin.post("feeds/:name/items") { request, context in
            try await guarded(context) {
                let name = try context.parameters.require("name")
                let count = try positiveInt(request, "count", default: 1)
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
                        + "\"fault\":\(record.fault.map { jsonString($0.description) } ?? "null")}"
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
        admin.post("faults") { request, context in
            try await guarded(context) {
                let parameters = request.uri.queryParameters
                guard let spec = parameters["fault"].map(String.init) else {
                    throw DemoFeedServerError.invalidArgument("missing fault=SPEC")
                }
                let kind = try parameters["kind"].map { raw in
                    guard let kind = RequestKind(rawValue: String(raw)) else {
                        throw DemoFeedServerError.invalidArgument("kind must be initial, older or newer")
                    }
                    return kind
                }
                let scripted = ScriptedFault(
                    try Fault(spec: spec), count: try positiveInt(request, "count", default: 1),
                    feed: parameters["feed"].map(String.init), kind: kind)
                try await state.script(scripted)
                return ok("{\"scripted\":\(jsonString(scripted.fault.description)),\"count\":\(scripted.remaining)}")
            }
        }
        admin.get("faults") { _, context in
            try await guarded(context) {
                let rows = await state.pendingScriptedFaults.map { fault in
                    "{\"fault\":\(jsonString(fault.fault.description)),\"remaining\":\(fault.remaining),"
                        + "\"feed\":\(fault.feed.map(jsonString) ?? "null"),\"kind\":\(fault.kind.map { jsonString($0.rawValue) } ?? "null")}"
                }
                return ok("[\(rows.joined(separator: ","))]")
            }
        }
        admin.delete("faults") { _, context in
            try await guarded(context) {
                await state.clearScriptedFaults()
                return ok("{}")
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
            + "\"requests\":\(requests),\"stalled\":\(await gate.stalledCount)}"
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

    private func positiveInt(_ request: Request, _ key: String, default value: Int) throws -> Int {
        guard let raw = request.uri.queryParameters[key[...]] else { return value }
        guard let parsed = Int(raw), parsed > 0 else {
            throw DemoFeedServerError.invalidArgument("\(key) must be a positive integer, got '\(raw)'")
        }
        return parsed
    }

    private func ok(_ json: String) -> Response { FeedHandler.json(.ok, Array((json + "\n").utf8)) }
}
