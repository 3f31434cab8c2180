// A real TypeScript SDK client, in either era, driving one server through the
// facade: the dual-era matrix of tests/e2e/test_eras.py.
//
//   node era-client.mjs --sdk v2|v1 --mode modern|legacy --url URL [--token T] --profile JSON
//
// --sdk v2: @modelcontextprotocol/client 2.4 (modern: pinned to 2026-07-28, no
//           fallback; legacy: the initialize handshake);
// --sdk v1: @modelcontextprotocol/sdk 1.x (legacy only).
// The profile names what to exercise on this server (see test_eras.py);
// every step runs and reports on its own, so one failure shows the others.
// Prints one JSON report on stdout: {"steps": {name: {ok, ...}}}.
import * as v2 from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ElicitRequestSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
const profile = JSON.parse(args.profile);
const modern = args.mode === "modern";
const TIMEOUT = 20_000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const textOf = (r) => (r.content || []).map((c) => c.text || "").join(" ");
const steps = {};
const elicitations = [];
const notifications = [];

async function step(name, fn) {
  if (steps[name]) return;
  try {
    steps[name] = { ok: true, ...(await fn()) };
  } catch (e) {
    steps[name] = { ok: false, error: String(e?.message ?? e), code: e?.code ?? null };
  }
}

function acceptElicitation(params) {
  elicitations.push(params?.message ?? "");
  const content = {};
  for (const [k, p] of Object.entries(params?.requestedSchema?.properties ?? {})) {
    if (p.type === "boolean") content[k] = true;
    else if (p.type === "number" || p.type === "integer") content[k] = 1;
    else if (Array.isArray(p.enum)) content[k] = p.enum[0];
    else content[k] = "octocat";
  }
  return { action: "accept", content };
}

const headers = args.token ? { Authorization: `Bearer ${args.token}` } : {};
let client;
let transportV1;
if (args.sdk === "v2") {
  client = new v2.Client(
    { name: "mcp-warden-era-client", version: "1.0.0" },
    {
      capabilities: { elicitation: {}, sampling: {} },
      versionNegotiation: { mode: modern ? { pin: "2026-07-28" } : "legacy" },
      inputRequired: { autoFulfill: true, maxRounds: 8 },
    },
  );
  client.setRequestHandler("elicitation/create", async (req) => acceptElicitation(req.params));
  client.setNotificationHandler("notifications/tools/list_changed", async (n) => notifications.push(n.method ?? "notifications/tools/list_changed"));
  client.setNotificationHandler("notifications/resources/updated", async (n) => notifications.push("notifications/resources/updated"));
  await client.connect(new v2.StreamableHTTPClientTransport(new URL(args.url), { requestInit: { headers } }));
} else {
  client = new ClientV1({ name: "mcp-warden-era-client", version: "1.0.0" }, { capabilities: { elicitation: {}, sampling: {} } });
  client.setRequestHandler(ElicitRequestSchema, async (req) => acceptElicitation(req.params));
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => notifications.push("notifications/tools/list_changed"));
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, async () => notifications.push("notifications/resources/updated"));
  await client.connect(new TransportV1(new URL(args.url), { requestInit: { headers } }));
}
const opts = { timeout: TIMEOUT };
// v1 takes a result schema before the options; v2 does not.
const call = (params, options = opts) =>
  args.sdk === "v2" ? client.callTool(params, options) : client.callTool(params, undefined, options);

await step("tools", async () => {
  const list = await client.listTools(undefined, { ...opts, cacheMode: "bypass" });
  const r = await call({ name: profile.tool.name, arguments: profile.tool.args ?? {} });
  return { tools: list.tools.map((t) => t.name), text: textOf(r), isError: r.isError ?? false };
});

if (profile.progress) {
  await step("progress", async () => {
    const seen = [];
    const r = await call({ name: profile.progress.name, arguments: profile.progress.args ?? {} }, {
      ...opts,
      onprogress: (p) => seen.push(p.progress),
      resetTimeoutOnProgress: true,
    });
    return { progress: seen, text: textOf(r) };
  });
}

if (profile.resource) {
  await step("resources", async () => {
    const list = await client.listResources(undefined, { ...opts, cacheMode: "bypass" });
    const r = await client.readResource({ uri: profile.resource }, opts);
    return { listed: list.resources.map((x) => x.uri), contents: r.contents.map((c) => c.uri) };
  });
}

if (profile.prompt) {
  await step("prompts", async () => {
    const list = await client.listPrompts(undefined, { ...opts, cacheMode: "bypass" });
    const r = await client.getPrompt({ name: profile.prompt.name, arguments: profile.prompt.args ?? {} }, opts);
    return { listed: list.prompts.map((p) => p.name), messages: r.messages.length };
  });
}

if (profile.elicit) {
  await step("elicitation", async () => {
    const before = elicitations.length;
    const r = await call({ name: profile.elicit.name, arguments: profile.elicit.args ?? {} });
    return { asked: elicitations.length - before, text: textOf(r), isError: r.isError ?? false };
  });
}

if (profile.slow) {
  await step("cancellation", async () => {
    const controller = new AbortController();
    const started = Date.now();
    const pending = call({ name: profile.slow.name, arguments: profile.slow.args ?? {} }, {
      ...opts,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort("the test cancels"), 500);
    let aborted = false;
    try {
      await pending;
    } catch {
      aborted = true;
    }
    const took = Date.now() - started;
    // The facade still serves the caller after a cancellation.
    const after = await call({ name: profile.tool.name, arguments: profile.tool.args ?? {} });
    return { aborted, took, after: textOf(after) };
  });
}

if (profile.subscribe) {
  await step("subscriptions", async () => {
    const before = notifications.length;
    const want = profile.subscribe.expect;
    let sub = null;
    if (modern && args.sdk === "v2") {
      sub = await client.listen(profile.subscribe.filter, opts);
    } else if (profile.subscribe.filter.resourceSubscriptions) {
      for (const uri of profile.subscribe.filter.resourceSubscriptions) await client.subscribeResource({ uri }, opts);
    }
    await call({ name: profile.subscribe.trigger.name, arguments: profile.subscribe.trigger.args ?? {} });
    const end = Date.now() + (profile.subscribe.wait_ms ?? 8000);
    while (!notifications.slice(before).includes(want) && Date.now() < end) await sleep(50);
    const got = notifications.slice(before);
    if (sub) await sub.close();
    return { notified: got.includes(want), got };
  });
}

if (profile.denied) {
  await step("denied", async () => {
    try {
      const r = await call({ name: profile.denied.name, arguments: profile.denied.args ?? {} });
      return { refused: false, isError: r.isError ?? false, text: textOf(r) };
    } catch (e) {
      return { refused: true, code: e?.code ?? null, message: String(e?.message ?? e) };
    }
  });
}

// The version the client ended up speaking (v1 keeps it on its transport).
const version = client.getNegotiatedProtocolVersion?.() ?? client.transport?.protocolVersion ?? client.transport?._protocolVersion ?? null;
console.log(JSON.stringify({ steps, version }));
await client.close().catch(() => {});
process.exit(0);
