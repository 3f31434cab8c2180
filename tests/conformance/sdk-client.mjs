#!/usr/bin/env node
// A real MCP client (TypeScript SDK v2, `@modelcontextprotocol/client` 2.4.0)
// for the *client* scenarios of @modelcontextprotocol/conformance
// 0.2.0-alpha.12, where the conformance CLI plays the server:
//
//   node tests/node_modules/conformance-next/dist/index.js client \
//     --command "node tests/conformance/sdk-client.mjs" --scenario http-standard-headers
//
// How the CLI runs it: it starts the scenario's mock server, then spawns the
// command (through a shell, split on spaces) with the server URL appended as
// the LAST argument, and with
//   MCP_CONFORMANCE_SCENARIO          scenario name (selects what this client does)
//   MCP_CONFORMANCE_PROTOCOL_VERSION  the wire version to speak (2026-07-28 or a
//                                     dated legacy version; 2025-11-25 when the
//                                     CLI got no --spec-version and the scenario
//                                     is older than 2026-07-28)
//   MCP_CONFORMANCE_CONTEXT           JSON with scenario data (auth scenarios only)
// Exit status 0 = the client did its part; the CLI scores what it observed.
//
// Putting an intermediary (e.g. the mcp-warden facade) in between: the URL the
// client talks to can be replaced, in this order of precedence, by
//   --url URL                         (argument before the appended server URL)
//   MCP_CLIENT_URL_OVERRIDE=URL       (environment)
// The CLI-provided URL is then only reported (stderr) -- a wrapper command is
// expected to start the intermediary pointed at that URL first, e.g.
//   --command "sh tests/conformance/my-wrapper.sh"  (wrapper: $1 = server URL;
//   start the facade with upstream $1, then
//   MCP_CLIENT_URL_OVERRIDE=http://127.0.0.1:PORT/mcp node sdk-client.mjs "$1").
//
// Other knobs (environment):
//   MCP_CLIENT_NEGOTIATION = pin (default for 2026-07-28: versionNegotiation
//       {pin: <version>}, no legacy fallback) | auto (probe with
//       server/discover, fall back to initialize) | legacy (initialize only;
//       the default for dated versions <= 2025-11-25)
//   MCP_CLIENT_TIMEOUT_MS  per-request timeout (default 10000)
//   MCP_CLIENT_DEADLINE_MS whole-run deadline, exit 3 after it (default 25000)
//   MCP_CLIENT_STRICT=1    do not tolerate the SDK's rejection of the
//       resultType-less result in sep-2322-client-request-state (see there)
//
// Scenarios handled: http-standard-headers, request-metadata,
// sep-2322-client-request-state, json-schema-2020-12-preservation,
// json-schema-ref-no-deref, tools_call; any other scenario gets a generic
// connect + tools/list + prompts/list + resources/list walk.
// Logs go to stderr; stdout gets one JSON line per step (the CLI saves both).

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const MODERN = '2026-07-28';
const log = (...a) => console.error('[sdk-client]', ...a);
const step = (name, data) => console.log(JSON.stringify({ step: name, ...data }));

// ----- arguments / environment ----------------------------------------------
const argv = process.argv.slice(2);
let urlArg;
const rest = [];
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--url') urlArg = argv[++i];
  else rest.push(argv[i]);
}
const cliUrl = rest.at(-1);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? 'generic';
const version = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION ?? MODERN;
const targetUrl = urlArg ?? process.env.MCP_CLIENT_URL_OVERRIDE ?? cliUrl;
const timeout = Number(process.env.MCP_CLIENT_TIMEOUT_MS ?? 10000);
if (!targetUrl) {
  console.error('usage: sdk-client.mjs [--url URL] SERVER_URL  (env MCP_CONFORMANCE_SCENARIO, MCP_CLIENT_URL_OVERRIDE)');
  process.exit(2);
}
const modern = version >= MODERN;
const negotiation = process.env.MCP_CLIENT_NEGOTIATION ?? (modern ? 'pin' : 'legacy');
const mode = negotiation === 'pin' ? { pin: modern ? version : MODERN } : negotiation;
log(`scenario=${scenario} version=${version} negotiation=${JSON.stringify(mode)} url=${targetUrl}`
  + (targetUrl !== cliUrl ? ` (CLI server: ${cliUrl})` : ''));

// ----- the client ----------------------------------------------------------------
const client = new Client(
  { name: 'mcp-warden-sdk-client', version: '1.0.0' },
  {
    capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } },
    versionNegotiation: { mode },
    inputRequired: { autoFulfill: true, maxRounds: 10 },
  },
);

// Handlers for server->client input: used for legacy server->client requests
// and for the embedded requests of 2026-07-28 input_required results.
function defaultsFor(schema) {
  const out = {};
  for (const [k, p] of Object.entries(schema?.properties ?? {})) {
    if (p.default !== undefined) out[k] = p.default;
    else if (p.type === 'boolean') out[k] = true;
    else if (p.type === 'number' || p.type === 'integer') out[k] = 1;
    else if (p.type === 'array') out[k] = [];
    else if (Array.isArray(p.enum)) out[k] = p.enum[0];
    else if (Array.isArray(p.oneOf) && p.oneOf[0]?.const !== undefined) out[k] = p.oneOf[0].const;
    else out[k] = 'conformance';
  }
  return out;
}
client.setRequestHandler('elicitation/create', async (req) => {
  const content = defaultsFor(req.params?.requestedSchema);
  step('elicitation', { message: req.params?.message, content });
  return { action: 'accept', content };
});
client.setRequestHandler('sampling/createMessage', async (req) => {
  step('sampling', { messages: req.params?.messages?.length });
  return { role: 'assistant', content: { type: 'text', text: 'Sampled reply from mcp-warden-sdk-client.' }, model: 'conformance-model', stopReason: 'endTurn' };
});
client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: 'file:///tmp/conformance-root', name: 'Conformance Root' }] }));

const opts = { timeout };

async function listTools() {
  const r = await client.listTools(undefined, { ...opts, cacheMode: 'bypass' });
  step('tools/list', { tools: r.tools.map((t) => t.name) });
  return r.tools;
}
async function callTool(name, args = {}) {
  const r = await client.callTool({ name, arguments: args }, opts);
  step('tools/call', { name, isError: r.isError ?? false, text: r.content?.map((c) => c.text).filter(Boolean).join(' ') });
  return r;
}

// ----- scenarios -----------------------------------------------------------------
const scenarios = {
  // SEP-2243: Mcp-Method on every POST, Mcp-Name on tools/call, resources/read
  // (the resource URIs carry %20 and a query string) and prompts/get.
  async 'http-standard-headers'() {
    const tools = await listTools();
    for (const t of tools) await callTool(t.name);
    const { resources } = await client.listResources(undefined, { ...opts, cacheMode: 'bypass' });
    step('resources/list', { uris: resources.map((r) => r.uri) });
    for (const r of resources) {
      await client.readResource({ uri: r.uri }, { ...opts, cacheMode: 'bypass' });
      step('resources/read', { uri: r.uri });
    }
    const { prompts } = await client.listPrompts(undefined, { ...opts, cacheMode: 'bypass' });
    step('prompts/list', { prompts: prompts.map((p) => p.name) });
    for (const p of prompts) {
      await client.getPrompt({ name: p.name }, opts);
      step('prompts/get', { name: p.name });
    }
  },

  // SEP-2575: per-request _meta + MCP-Protocol-Version; the mock rejects the
  // first request with -32022 and expects a retry at 2026-07-28.
  async 'request-metadata'() {
    await listTools();
    // Only the requests matter here (the mock records their metadata). The
    // mock lists no tools, so an intermediary that polices tool calls (the
    // mcp-warden facade) refuses this one: the refusal is not a failure.
    try {
      await callTool('conformance_probe');
    } catch (e) {
      log(`tools/call conformance_probe refused: ${e?.message ?? e}`);
    }
  },

  // SEP-2322 (MRTR): requestState echoed byte-exact on a fresh id, no
  // requestState when none was sent, no leakage into an unrelated call
  // (made while an MRTR flow is in progress), missing resultType = complete.
  async 'sep-2322-client-request-state'() {
    await listTools();
    const [echo] = await Promise.all([callTool('test_mrtr_echo_state'), callTool('test_mrtr_unrelated')]);
    if (!echo.content?.some((c) => c.text === 'echo-state-ok')) throw new Error('echo_state flow did not complete');
    await callTool('test_mrtr_no_state');
    await callTool('test_mrtr_unrelated');
    // The mock answers this call WITHOUT resultType. The scenario wants it
    // treated as complete; SDK 2.4 instead rejects it on a 2026-07-28
    // connection ("missing required resultType", spec basic/index: results
    // MUST carry it; absent-means-complete is only for earlier-revision
    // servers). What the CLI checks (no retry with inputResponses) holds
    // either way; the rejection is logged and, unless MCP_CLIENT_STRICT=1,
    // does not fail the run.
    try {
      await callTool('test_mrtr_no_result_type');
    } catch (err) {
      if (process.env.MCP_CLIENT_STRICT === '1' || !/missing required resultType/.test(String(err?.message))) throw err;
      step('tools/call', { name: 'test_mrtr_no_result_type', sdkRejected: String(err.message) });
      log('SDK rejected the resultType-less result (tolerated; MCP_CLIENT_STRICT=1 to fail):', err.message);
    }
  },

  // SEP-1613/2106: echo the focal tool's inputSchema, as the client holds it,
  // back through json_schema_echo.
  async 'json-schema-2020-12-preservation'() {
    const tools = await listTools();
    const focal = tools.find((t) => t.name === 'json_schema_2020_12_tool');
    if (!focal) throw new Error('json_schema_2020_12_tool not listed');
    await callTool('json_schema_echo', { schema: focal.inputSchema });
  },

  // SEP-2106: list a tool whose inputSchema $refs a network URI; the client
  // must not fetch it.
  async 'json-schema-ref-no-deref'() {
    const tools = await listTools();
    step('inputSchema', { tool: tools[0]?.name, schema: tools[0]?.inputSchema });
  },

  async tools_call() {
    const tools = await listTools();
    const t = tools.find((x) => x.name === 'add_numbers') ?? tools[0];
    if (t) await callTool(t.name, t.name === 'add_numbers' ? { a: 5, b: 3 } : {});
  },

  async generic() {
    const caps = client.getServerCapabilities?.() ?? {};
    if (caps.tools) await listTools();
    if (caps.prompts) step('prompts/list', { prompts: (await client.listPrompts(undefined, opts)).prompts.map((p) => p.name) });
    if (caps.resources) step('resources/list', { uris: (await client.listResources(undefined, opts)).resources.map((r) => r.uri) });
  },
};

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(targetUrl));
  await client.connect(transport, opts);
  step('connected', {
    protocolVersion: client.getNegotiatedProtocolVersion(),
    server: client.getServerVersion(),
  });
  const run = scenarios[scenario];
  if (!run) log(`no specific handler for scenario '${scenario}': generic walk`);
  await (run ?? scenarios.generic)();
  await client.close();
}

const watchdog = setTimeout(() => { log('timed out'); process.exit(3); }, Number(process.env.MCP_CLIENT_DEADLINE_MS ?? 25000));
watchdog.unref();
main().then(
  () => process.exit(0),
  (err) => {
    log('failed:', err?.stack ?? err);
    process.exit(1);
  },
);
