// The official TypeScript MCP SDK client driving a server through the facade.
// Run by tests/e2e/test_passthrough_typescript.py; prints one JSON report on stdout.
//
//   node client.mjs --flow everything|paging --url http://127.0.0.1:P/mcp
//   node client.mjs --flow everything|paging --stdio -- CMD ARGS...   (spawns CMD, e.g. the facade in --stdio mode)
//
// Exit 0 with {"ok": true, ...} after the whole flow; exit 1 with {"ok": false, "error", "report"}
// on the first failure (the report shows how far it got).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const ROOT_URI = "file:///tmp/mcp-warden-ts-root";
const TIMEOUT_MS = 20_000;

function parseArgs(argv) {
  const args = { flow: "everything", url: null, command: null };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--flow") args.flow = argv[++i];
    else if (argv[i] === "--url") args.url = argv[++i];
    else if (argv[i] === "--stdio") {
      const rest = argv.slice(i + 1);
      args.command = rest[0] === "--" ? rest.slice(1) : rest;
      break;
    } else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!args.url && !args.command) throw new Error("need --url URL or --stdio -- CMD...");
  return args;
}

const textOf = (result) => (result.content || []).map((c) => c.text || "").join("");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(pred, what, ms = 8000) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(20);
  }
}

async function listAll(client, method, key) {
  const pages = [];
  let cursor;
  for (;;) {
    const res = await client[method](cursor === undefined ? {} : { cursor });
    pages.push({ cursor: cursor ?? null, items: res[key] });
    cursor = res.nextCursor;
    if (cursor === undefined) return pages;
    if (pages.length > 10) throw new Error(`${method} pagination does not end`);
  }
}

async function everything(client, report, seen) {
  const opts = { timeout: TIMEOUT_MS };
  report.server = client.getServerVersion();
  report.instructions = (client.getInstructions() || "").length;

  const pages = await listAll(client, "listTools", "tools");
  report.toolPages = pages.length;
  report.tools = pages.flatMap((p) => p.items.map((t) => t.name));

  report.echo = textOf(await client.callTool({ name: "echo", arguments: { message: "héllo from TS ✓" } }, undefined, opts));
  report.sum = textOf(await client.callTool({ name: "get-sum", arguments: { a: 2, b: 40 } }, undefined, opts));

  // Progress
  report.progress = [];
  const lro = await client.callTool(
    { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 4 } },
    undefined,
    { ...opts, onprogress: (p) => report.progress.push([p.progress, p.total]) },
  );
  report.longRunning = textOf(lro);

  // Cancellation: abort after the first progress notification; the session goes on.
  const ac = new AbortController();
  const started = Date.now();
  let firstProgress = false;
  try {
    await client.callTool(
      { name: "trigger-long-running-operation", arguments: { duration: 30, steps: 60 } },
      undefined,
      { ...opts, signal: ac.signal, onprogress: () => { if (!firstProgress) { firstProgress = true; ac.abort("user pressed stop"); } } },
    );
    report.cancel = { aborted: false };
  } catch (e) {
    report.cancel = { aborted: true, error: String(e), ms: Date.now() - started, sawProgress: firstProgress };
  }
  report.cancel.after = textOf(await client.callTool({ name: "echo", arguments: { message: "after cancel" } }, undefined, opts));

  // Resources and prompts
  const resources = (await client.listResources()).resources;
  report.resources = resources.map((r) => r.uri);
  const doc = resources.find((r) => r.uri.endsWith("features.md"));
  report.readDoc = (await client.readResource({ uri: doc.uri })).contents[0].text.slice(0, 200);
  report.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  report.readDynamic = (await client.readResource({ uri: "demo://resource/dynamic/text/3" })).contents[0].text;
  report.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
  report.prompt = (await client.getPrompt({ name: "args-prompt", arguments: { city: "Nantes" } })).messages[0].content.text;

  // Server-to-client requests
  report.sampling = textOf(await client.callTool({ name: "trigger-sampling-request", arguments: { prompt: "ts-ping", maxTokens: 9 } }, undefined, opts));
  report.samplingSeen = seen.sampling;
  report.elicitation = textOf(await client.callTool({ name: "trigger-elicitation-request", arguments: {} }, undefined, opts));
  // The server's roots are the facade's (`--root`): it answers roots/list
  // itself, so this client is never asked. Wait until the server has them.
  const end = Date.now() + 8000;
  do {
    report.roots = textOf(await client.callTool({ name: "get-roots-list", arguments: {} }, undefined, opts));
    if (report.roots.includes(ROOT_URI)) break;
    await sleep(100);
  } while (Date.now() < end);
  report.rootsAsked = seen.roots;

  // Server notifications
  await client.setLoggingLevel("debug");
  await client.callTool({ name: "toggle-simulated-logging", arguments: {} }, undefined, opts);
  await waitFor(() => seen.logs.length > 0, "notifications/message");
  await client.callTool({ name: "toggle-simulated-logging", arguments: {} }, undefined, opts);
  report.logs = seen.logs.length;
  await client.subscribeResource({ uri: doc.uri });
  await client.callTool({ name: "toggle-subscriber-updates", arguments: {} }, undefined, opts);
  await waitFor(() => seen.updated.length > 0, "notifications/resources/updated");
  await client.callTool({ name: "toggle-subscriber-updates", arguments: {} }, undefined, opts);
  report.updated = seen.updated;
  report.listChanged = seen.listChanged;
  report.subscribedUri = doc.uri;
}

async function paging(client, report) {
  const tools = await listAll(client, "listTools", "tools");
  report.toolPages = tools.map((p) => ({ cursor: p.cursor, names: p.items.map((t) => t.name), descriptions: p.items.map((t) => t.description) }));
  const resources = await listAll(client, "listResources", "resources");
  report.resourcePages = resources.length;
  report.resources = resources.flatMap((p) => p.items.map((r) => r.uri));
  const prompts = await listAll(client, "listPrompts", "prompts");
  report.promptPages = prompts.length;
  report.prompts = prompts.flatMap((p) => p.items.map((r) => r.name));
  report.echo = textOf(await client.callTool({ name: "echo", arguments: { text: "paged" } }));
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const report = { flow: args.flow };
  const seen = { sampling: [], roots: 0, logs: [], updated: [], listChanged: 0 };
  const client = new Client(
    { name: "mcp-warden-ts-e2e", version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seen.sampling.push(req.params.messages[0].content.text);
    return { role: "assistant", model: "ts-e2e-model", content: { type: "text", text: "sampled-by-ts" } };
  });
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "accept", content: { name: "Grace Hopper" } }));
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    seen.roots++;
    return { roots: [{ uri: ROOT_URI, name: "ts root" }] };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { seen.logs.push(n.params.level); });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { seen.updated.push(n.params.uri); });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { seen.listChanged++; });

  const transport = args.url
    ? new StreamableHTTPClientTransport(new URL(args.url))
    : new StdioClientTransport({ command: args.command[0], args: args.command.slice(1), stderr: "inherit" });
  try {
    await client.connect(transport, { timeout: TIMEOUT_MS });
    report.protocolVersion = transport.protocolVersion ?? null;
    report.sessionId = args.url ? Boolean(transport.sessionId) : null;
    if (args.flow === "everything") await everything(client, report, seen);
    else if (args.flow === "paging") await paging(client, report);
    else throw new Error(`unknown flow ${args.flow}`);
    await client.close();
    process.stdout.write(JSON.stringify({ ok: true, ...report }) + "\n");
    process.exit(0);
  } catch (e) {
    process.stdout.write(JSON.stringify({ ok: false, error: String(e?.stack || e), report }) + "\n");
    process.exit(1);
  }
}

main();
