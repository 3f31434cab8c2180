#!/usr/bin/env node
// Dual-era MCP conformance fixture server for mcp-warden's tests, written with
// the TypeScript SDK v2 (`@modelcontextprotocol/server` 2.4.0).
//
// Implements what the server scenarios of @modelcontextprotocol/conformance
// 0.2.0-alpha.12 call, for protocol 2026-07-28 (stateless, per-request `_meta`,
// server/discover, subscriptions/listen, multi-round-trip `input_required`
// results, SEP-2243 headers, caching hints) and for the legacy 2025-11-25 era
// (initialize handshake, sessions, server->client sampling/elicitation).
// One factory defines the tools/resources/prompts; both eras serve it.
//
//   node modern-fixture-server.mjs --http PORT [--legacy sessionful|stateless|reject]
//                                  [--response-mode auto|sse|json] [--no-skills] [--no-tasks]
//       Streamable HTTP on 127.0.0.1:PORT/mcp (PORT 0 picks a free port; the
//       line "listening on http://127.0.0.1:N/mcp" goes to stderr).
//       Modern requests (carrying the `_meta` envelope claim) go to the SDK's
//       createMcpHandler (one McpServer per request). Legacy requests go to:
//         sessionful (default): one McpServer + WebStandardStreamableHTTP
//                   transport per Mcp-Session-Id (event store, retry: 500) --
//                   the `isLegacyRequest` routing pattern the SDK documents;
//         stateless: the SDK's own stateless legacy fallback (no sessions, so
//                   server->client requests cannot be answered);
//         reject:   modern only (legacy requests get UnsupportedProtocolVersion).
//       Host/Origin headers are checked (DNS-rebinding protection) first.
//       --response-mode: how modern requests are answered (SDK option): auto
//       (default; JSON unless the handler sends something before its result,
//       then SSE), sse (always SSE), json (never SSE; mid-call notifications
//       are dropped).
//       --no-skills: do not attach the SEP-2640 skills extension.
//       --no-tasks: do not serve (or advertise) the tasks extension.
//   node modern-fixture-server.mjs --stdio [--legacy serve|reject] [--no-skills] [--no-tasks]
//       serveStdio: the opening message picks the era for the connection.
//
// Logs go to stderr only (stdout is the stdio transport).

import { createServer as createHttpServer } from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import * as z from 'zod';
import {
  McpServer,
  ResourceTemplate,
  WebStandardStreamableHTTPServerTransport,
  acceptedContent,
  completable,
  createMcpHandler,
  createRequestStateCodec,
  fromJsonSchema,
  hostHeaderValidationResponse,
  inputRequired,
  isInitializeRequest,
  isLegacyRequest,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  originValidationResponse,
  LATEST_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/server';
import { SkillsExtension, memorySkillFiles } from '@modelcontextprotocol/server/ext/skills';
import { TASKS, TasksTransport, answer as answerTasks, isModern, registerTaskTools } from './tasks-extension.mjs';

const log = (...args) => console.error('[modern-fixture]', ...args);

// 1x1 red PNG and a minimal (empty) 8 kHz mono 16-bit WAV.
const PNG_1X1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV_EMPTY = Buffer.concat([
  Buffer.from('RIFF'), u32(36), Buffer.from('WAVEfmt '), u32(16),
  u16(1), u16(1), u32(8000), u32(16000), u16(2), u16(16),
  Buffer.from('data'), u32(0),
]).toString('base64');
function u32(n) { const b = Buffer.alloc(4); b.writeUInt32LE(n); return b; }
function u16(n) { const b = Buffer.alloc(2); b.writeUInt16LE(n); return b; }

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Per process (a stdio server is one process for all of the facade's callers).
// `listensCancelled`: stdio only, see ListenCancels.
const COUNTERS = { cancelled: 0, listensCancelled: 0 };
const text = (t) => ({ type: 'text', text: t });
const json = (schema) => fromJsonSchema(schema);
const NO_ARGS = json({ type: 'object', properties: {} });

// ---------------------------------------------------------------------------
// Process-wide state shared by the per-request / per-session instances.
// ---------------------------------------------------------------------------
const state = {
  // The modern handler (createMcpHandler): its `notify` publishes list-changed
  // events to open subscriptions/listen streams.
  modern: null,
  // Long-lived instances (legacy HTTP sessions; the stdio connection's pinned
  // instance, either era): list-changed notifications go through them (on a
  // modern stdio connection serveStdio routes them to open listen streams).
  connectedServers: new Set(),
};

// requestState integrity (SEP-2322: servers MUST reject tampered state). One
// HMAC key per process; every requestState this fixture mints goes through it
// and the SDK's `requestState.verify` hook checks every echoed one.
const stateCodec = createRequestStateCodec({ key: randomBytes(32), ttlSeconds: 600 });

// SEP-2640 skills extension (io.modelcontextprotocol/skills): a small
// in-memory catalog, attached to every instance unless --no-skills.
const SKILLS = await SkillsExtension.load(memorySkillFiles({
  'fixture-skill/SKILL.md': [
    '---',
    'name: fixture-skill',
    'description: A tiny skill served by the mcp-warden conformance fixture.',
    '---',
    '',
    '# Fixture skill',
    '',
    'See [the guide](references/GUIDE.md).',
    '',
  ].join('\n'),
  'fixture-skill/references/GUIDE.md': '# Guide\n\nNothing to see here.\n',
}), { onWarning: (w) => log(`skills: ${w.path}: ${w.message}`) });
const options = { skills: true, tasks: true };

function eachConnected(fn) {
  for (const mcp of state.connectedServers) {
    if (!mcp.isConnected()) continue;
    try { fn(mcp); } catch (err) { log('list-changed notification failed:', err?.message ?? err); }
  }
}
function notifyToolsChanged() {
  state.modern?.notify.toolsChanged();
  eachConnected((mcp) => mcp.sendToolListChanged());
}
function notifyPromptsChanged() {
  state.modern?.notify.promptsChanged();
  eachConnected((mcp) => mcp.sendPromptListChanged());
}
function notifyResourceUpdated(uri) {
  state.modern?.notify.resourceUpdated(uri);
  eachConnected((mcp) => mcp.server.sendResourceUpdated({ uri }));
}
function notifyResourcesChanged() {
  state.modern?.notify.resourcesChanged();
  eachConnected((mcp) => mcp.sendResourceListChanged());
}

// The client capabilities a request declares: the `_meta` envelope on the
// 2026-07-28 era, the initialize-declared ones on a legacy connection.
function clientCapabilities(mcp, ctx) {
  const env = ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities'];
  return env ?? mcp.server.getClientCapabilities() ?? {};
}

const bare = (responses, key) => {
  const v = responses?.[key];
  return v && typeof v === 'object' && !Array.isArray(v) ? v : undefined;
};
const samplingText = (r) => {
  const c = Array.isArray(r?.content) ? r.content : [r?.content];
  return c.map((x) => x?.text ?? '').join('') || JSON.stringify(r ?? null);
};

// ---------------------------------------------------------------------------
// Schemas.
// ---------------------------------------------------------------------------
const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      $anchor: 'addressDef',
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } },
    },
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
};

const SEP1034_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'User name', default: 'John Doe' },
    age: { type: 'integer', description: 'User age', default: 30 },
    score: { type: 'number', description: 'User score', default: 95.5 },
    status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', description: 'Verification status', default: true },
  },
  required: [],
};

const SEP1330_SCHEMA = {
  type: 'object',
  properties: {
    untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
    titledSingle: {
      type: 'string',
      oneOf: [
        { const: 'value1', title: 'First Option' },
        { const: 'value2', title: 'Second Option' },
        { const: 'value3', title: 'Third Option' },
      ],
    },
    legacyEnum: {
      type: 'string',
      enum: ['opt1', 'opt2', 'opt3'],
      enumNames: ['Option One', 'Option Two', 'Option Three'],
    },
    untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
    titledMulti: {
      type: 'array',
      items: {
        anyOf: [
          { const: 'value1', title: 'First Choice' },
          { const: 'value2', title: 'Second Choice' },
          { const: 'value3', title: 'Third Choice' },
        ],
      },
    },
  },
  required: [],
};

const objectSchema = (props, required = Object.keys(props)) => ({ type: 'object', properties: props, required });

// ---------------------------------------------------------------------------
// The factory: one McpServer with everything, for either era.
// ---------------------------------------------------------------------------
function buildServer(ctx = { era: 'modern' }) {
  const mcp = new McpServer(
    { name: 'mcp-warden-modern-conformance-fixture', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
      instructions: 'Dual-era conformance fixture for mcp-warden tests.',
      requestState: { verify: (s, c) => stateCodec.verify(s, c) },
    },
  );
  if (options.skills) SKILLS.attach(mcp);
  // The tasks extension (tasks-extension.mjs answers its requests before the
  // SDK sees them); a legacy connection is never offered it.
  if (options.tasks) {
    if (ctx.era !== 'legacy') mcp.server.registerCapabilities({ extensions: { [TASKS]: {} } });
    registerTaskTools(mcp, json, sleep);
  }
  const tool = (name, description, inputSchema, run) =>
    mcp.registerTool(name, { description, inputSchema }, run);

  // ----- content tools -----------------------------------------------------
  tool('test_simple_text', 'Returns a simple text content block', NO_ARGS,
    async () => ({ content: [text('This is a simple text response for testing.')] }));
  tool('test_image_content', 'Returns an image content block (1x1 PNG)', NO_ARGS,
    async () => ({ content: [{ type: 'image', data: PNG_1X1, mimeType: 'image/png' }] }));
  tool('test_audio_content', 'Returns an audio content block (empty WAV)', NO_ARGS,
    async () => ({ content: [{ type: 'audio', data: WAV_EMPTY, mimeType: 'audio/wav' }] }));
  tool('test_embedded_resource', 'Returns an embedded text resource', NO_ARGS, async () => ({
    content: [{
      type: 'resource',
      resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
    }],
  }));
  tool('test_multiple_content_types', 'Returns text, image and embedded resource content together', NO_ARGS, async () => ({
    content: [
      text('Multiple content types test:'),
      { type: 'image', data: PNG_1X1, mimeType: 'image/png' },
      {
        type: 'resource',
        resource: {
          uri: 'test://mixed-content-resource',
          mimeType: 'application/json',
          text: JSON.stringify({ test: 'data', value: 123 }),
        },
      },
    ],
  }));
  tool('test_error_handling', 'Always fails with isError: true', NO_ARGS, async () => ({
    isError: true,
    content: [text('This tool intentionally returns an error for testing')],
  }));

  // ----- logging / progress -------------------------------------------------
  // ctx.mcpReq.log honours logging/setLevel (legacy) and the per-request
  // `_meta` logLevel (2026-07-28: nothing is sent when the request set none).
  const logRun = async (_args, c) => {
    for (const [i, msg] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
      await c.mcpReq.log('info', msg, 'conformance-fixture');
      if (i < 2) await sleep(50);
    }
    return { content: [text('Tool with logging executed successfully')] };
  };
  tool('test_tool_with_logging', 'Sends three info log notifications while it runs', NO_ARGS, logRun);
  tool('test_logging_tool', 'Logs at info level (only sent if the request asked for logs)', NO_ARGS, logRun);
  tool('test_tool_with_progress', 'Reports progress 0, 50, 100 of 100 when given a progressToken', NO_ARGS, async (_a, c) => {
    const token = c.mcpReq._meta?.progressToken;
    for (const progress of [0, 50, 100]) {
      if (token !== undefined) {
        await c.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken: token, progress, total: 100, message: `step ${progress}/100` },
        });
      }
      if (progress < 100) await sleep(50);
    }
    return { content: [text(`Progress tool completed (token: ${token ?? 'none'})`)] };
  });

  // For mcp-warden's cancellation tests: sleeps `ms` (default 10 s) unless
  // the request is cancelled first (the abort is counted, see test_counters).
  tool('test_sleep', 'Sleeps for ms milliseconds, or until the request is cancelled', {
    ms: z.number().int().min(0).max(60000).optional(),
  }, async ({ ms }, c) => {
    const signal = c.mcpReq.signal;
    const aborted = await new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms ?? 10000);
      signal?.addEventListener('abort', () => { clearTimeout(timer); resolve(true); }, { once: true });
    });
    if (aborted) COUNTERS.cancelled += 1;
    return { content: [text(aborted ? 'cancelled' : 'slept')] };
  });
  tool('test_counters', 'How many test_sleep calls (and, on stdio, listens) were cancelled so far (this process)', NO_ARGS,
    async () => ({ content: [text(JSON.stringify(COUNTERS))] }));

  // ----- server->client input: legacy push style via the SDK's shim ---------
  // Written once with inputRequired(); on a legacy session the SDK's legacy
  // shim turns it into real sampling/createMessage / elicitation/create
  // requests, on 2026-07-28 it is an input_required result.
  tool('test_sampling', 'Asks the client for an LLM completion (sampling/createMessage)',
    json(objectSchema({ prompt: { type: 'string', description: 'The prompt to send to the LLM' } })),
    async (args, c) => {
      const r = bare(c.mcpReq.inputResponses, 'sampling');
      if (!r) {
        return inputRequired({
          inputRequests: {
            sampling: inputRequired.createMessage({
              messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt) } }],
              maxTokens: 100,
            }),
          },
        });
      }
      return { content: [text(`LLM response: ${samplingText(r)}`)] };
    });
  const elicitTool = (name, description, inputSchema, params, prefix) =>
    tool(name, description, inputSchema, async (args, c) => {
      const r = bare(c.mcpReq.inputResponses, 'elicitation');
      if (!r) return inputRequired({ inputRequests: { elicitation: inputRequired.elicit(params(args)) } });
      return { content: [text(`${prefix}: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`)] };
    });
  elicitTool('test_elicitation', 'Asks the client for user input (elicitation/create)',
    json(objectSchema({ message: { type: 'string', description: 'The message to show the user' } })),
    (args) => ({
      message: String(args.message),
      requestedSchema: objectSchema({
        username: { type: 'string', description: "User's response" },
        email: { type: 'string', description: "User's email address" },
      }),
    }),
    'User response');
  elicitTool('test_elicitation_sep1034_defaults', 'Elicitation whose schema has defaults for every primitive type (SEP-1034)',
    NO_ARGS, () => ({ message: 'Please review the fields (defaults provided)', requestedSchema: SEP1034_SCHEMA }),
    'Elicitation completed');
  elicitTool('test_elicitation_sep1330_enums', 'Elicitation with all five enum schema variants (SEP-1330)',
    NO_ARGS, () => ({ message: 'Please pick options', requestedSchema: SEP1330_SCHEMA }),
    'Elicitation completed');

  // ----- JSON Schema 2020-12 (SEP-1613, SEP-2106) ----------------------------
  tool('json_schema_2020_12_tool', 'Tool with JSON Schema 2020-12 features', json(JSON_SCHEMA_2020_12),
    async (args) => ({ content: [text(`json_schema_2020_12_tool called with ${JSON.stringify(args)}`)] }));

  // ----- SEP-1699 reconnection (legacy HTTP sessions) ------------------------
  tool('test_reconnection', 'Closes its SSE stream mid-call; the result arrives after the client reconnects', NO_ARGS,
    async (_a, c) => {
      if (c.http?.closeSSE) {
        log(`test_reconnection: closing SSE stream of request ${c.mcpReq.id}`);
        c.http.closeSSE();
        await sleep(100);
      }
      return { content: [text('Reconnection test completed successfully')] };
    });

  // ----- SEP-2243 custom header (x-mcp-header) -------------------------------
  tool('test_custom_header_param', 'Echoes a region that clients mirror into the Mcp-Param-Region header',
    json(objectSchema({ region: { type: 'string', description: 'Region', 'x-mcp-header': 'Region' } })),
    async (args) => ({ content: [text(`region=${args.region}`)] }));

  // ----- server-stateless (SEP-2575) diagnostics -----------------------------
  // Needs sampling: the SDK answers -32021 MissingRequiredClientCapability when
  // the request's _meta does not declare it.
  tool('test_missing_capability', 'Needs the client sampling capability (rejected with -32021 otherwise)', NO_ARGS,
    async (_a, c) => {
      const r = bare(c.mcpReq.inputResponses, 'sampling');
      if (!r) {
        return inputRequired({
          inputRequests: {
            sampling: inputRequired.createMessage({
              messages: [{ role: 'user', content: { type: 'text', text: 'ping' } }],
              maxTokens: 10,
            }),
          },
        });
      }
      return { content: [text(`sampled: ${samplingText(r)}`)] };
    });
  tool('test_streaming_elicitation', 'Sends a progress notification, then asks for input via input_required', NO_ARGS,
    async (_a, c) => {
      const r = bare(c.mcpReq.inputResponses, 'confirm');
      if (r) return { content: [text(`confirmed: ${JSON.stringify(r.content ?? {})}`)] };
      const token = c.mcpReq._meta?.progressToken;
      if (token !== undefined) {
        await c.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2 } });
      }
      return inputRequired({
        inputRequests: {
          confirm: inputRequired.elicit({
            message: 'Continue?',
            requestedSchema: objectSchema({ ok: { type: 'boolean' } }),
          }),
        },
      });
    });
  tool('test_trigger_tool_change', 'Announces a tools/list change to open subscriptions', NO_ARGS, async () => {
    setImmediate(notifyToolsChanged);
    return { content: [text('tools list change announced')] };
  });
  tool('test_trigger_prompt_change', 'Announces a prompts/list change to open subscriptions', NO_ARGS, async () => {
    setImmediate(notifyPromptsChanged);
    return { content: [text('prompts list change announced')] };
  });
  tool('test_trigger_resource_change', 'Announces a resources/list change to open subscriptions', NO_ARGS, async () => {
    setImmediate(notifyResourcesChanged);
    return { content: [text('resources list change announced')] };
  });
  tool('test_trigger_resource_update', 'Announces a change of test://watched-resource to its subscribers', NO_ARGS, async () => {
    setImmediate(() => notifyResourceUpdated('test://watched-resource'));
    return { content: [text('resource update announced')] };
  });

  // ----- multi-round-trip input_required (SEP-2322) ---------------------------
  const askName = (message = 'What is your name?') =>
    inputRequired.elicit({ message, requestedSchema: objectSchema({ name: { type: 'string' } }) });

  tool('test_input_required_result_elicitation', 'Round 1: asks for user_name; round 2: greets', NO_ARGS, async (_a, c) => {
    const name = acceptedContent(c.mcpReq.inputResponses, 'user_name')?.name;
    if (typeof name !== 'string') return inputRequired({ inputRequests: { user_name: askName() } });
    return { content: [text(`Hello, ${name}!`)] };
  });
  tool('test_input_required_result_sampling', 'Round 1: asks the client LLM; round 2: returns its answer', NO_ARGS, async (_a, c) => {
    const r = bare(c.mcpReq.inputResponses, 'capital_question');
    if (!r) {
      return inputRequired({
        inputRequests: {
          capital_question: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
            maxTokens: 100,
          }),
        },
      });
    }
    return { content: [text(`Sampling response: ${samplingText(r)}`)] };
  });
  tool('test_input_required_result_list_roots', 'Round 1: asks for roots; round 2: lists them', NO_ARGS, async (_a, c) => {
    const r = bare(c.mcpReq.inputResponses, 'client_roots');
    if (!Array.isArray(r?.roots)) return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
    return { content: [text(`Roots: ${r.roots.map((x) => x.uri).join(', ')}`)] };
  });
  tool('test_input_required_result_request_state', 'Round 1: confirm + requestState; round 2: checks the state', NO_ARGS,
    async (_a, c) => {
      const s = c.mcpReq.requestState();
      const ok = acceptedContent(c.mcpReq.inputResponses, 'confirm');
      if (s?.tool === 'request_state' && ok) {
        return { content: [text(`state-ok: confirmed=${JSON.stringify(ok.ok)}`)] };
      }
      return inputRequired({
        inputRequests: {
          confirm: inputRequired.elicit({
            message: 'Please confirm',
            requestedSchema: objectSchema({ ok: { type: 'boolean' } }),
          }),
        },
        requestState: await stateCodec.mint({ tool: 'request_state' }),
      });
    });
  tool('test_input_required_result_multiple_inputs', 'Round 1: elicitation + sampling + roots at once', NO_ARGS,
    async (_a, c) => {
      const resp = c.mcpReq.inputResponses ?? {};
      const name = acceptedContent(resp, 'user_name')?.name;
      const greeting = bare(resp, 'greeting');
      const roots = bare(resp, 'client_roots');
      if (c.mcpReq.requestState()?.tool === 'multiple' && typeof name === 'string' && greeting && Array.isArray(roots?.roots)) {
        return { content: [text(`name=${name}; greeting=${samplingText(greeting)}; roots=${roots.roots.length}`)] };
      }
      return inputRequired({
        inputRequests: {
          user_name: askName(),
          greeting: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }],
            maxTokens: 50,
          }),
          client_roots: inputRequired.listRoots(),
        },
        requestState: await stateCodec.mint({ tool: 'multiple' }),
      });
    });
  tool('test_input_required_result_multi_round', 'Three rounds: name, then colour, then the result', NO_ARGS,
    async (_a, c) => {
      const s = c.mcpReq.requestState();
      const resp = c.mcpReq.inputResponses;
      if (s?.round === 2) {
        const color = acceptedContent(resp, 'step2')?.color;
        if (typeof color === 'string') return { content: [text(`${s.name}'s favorite color is ${color}`)] };
      }
      const name = s?.round === 2 ? s.name : acceptedContent(resp, 'step1')?.name;
      if (typeof name === 'string') {
        return inputRequired({
          inputRequests: {
            step2: inputRequired.elicit({
              message: 'Step 2: What is your favorite color?',
              requestedSchema: objectSchema({ color: { type: 'string' } }),
            }),
          },
          requestState: await stateCodec.mint({ round: 2, name }),
        });
      }
      return inputRequired({
        inputRequests: { step1: askName('Step 1: What is your name?') },
        requestState: await stateCodec.mint({ round: 1 }),
      });
    });
  tool('test_input_required_result_tampered_state', 'HMAC-protected requestState; tampered state is rejected (-32602)', NO_ARGS,
    async (_a, c) => {
      const s = c.mcpReq.requestState();
      const ok = acceptedContent(c.mcpReq.inputResponses, 'confirm');
      if (s?.tool === 'tampered' && ok) return { content: [text('state verified')] };
      return inputRequired({
        inputRequests: {
          confirm: inputRequired.elicit({ message: 'Please confirm', requestedSchema: objectSchema({ ok: { type: 'boolean' } }) }),
        },
        requestState: await stateCodec.mint({ tool: 'tampered' }),
      });
    });
  tool('test_input_required_result_capabilities', 'Only asks for inputs the client declared capabilities for', NO_ARGS,
    async (_a, c) => {
      if (c.mcpReq.inputResponses && Object.keys(c.mcpReq.inputResponses).length > 0) {
        return { content: [text(`received: ${Object.keys(c.mcpReq.inputResponses).join(', ')}`)] };
      }
      const caps = clientCapabilities(mcp, c);
      const inputRequests = {};
      if (caps.sampling) {
        inputRequests.sampling = inputRequired.createMessage({
          messages: [{ role: 'user', content: { type: 'text', text: 'Say hello' } }],
          maxTokens: 20,
        });
      }
      if (caps.elicitation) inputRequests.elicitation = askName();
      if (caps.roots) inputRequests.roots = inputRequired.listRoots();
      if (Object.keys(inputRequests).length === 0) {
        return { content: [text('client declared no sampling, elicitation or roots capability')] };
      }
      return inputRequired({ inputRequests });
    });

  // ----- resources -------------------------------------------------------------
  const resource = (name, uri, mimeType, description, body) =>
    mcp.registerResource(name, uri, { title: name, description, mimeType }, async () => ({
      contents: [{ uri, mimeType, ...body }],
    }));
  resource('static-text', 'test://static-text', 'text/plain', 'A static text resource',
    { text: 'This is the content of the static text resource.' });
  resource('static-binary', 'test://static-binary', 'image/png', 'A static binary resource (PNG)', { blob: PNG_1X1 });
  resource('watched-resource', 'test://watched-resource', 'text/plain', 'A resource clients may subscribe to',
    { text: 'Watched resource content' });
  mcp.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { title: 'template', description: 'A resource template with parameter substitution', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [{
        uri: uri.href,
        mimeType: 'application/json',
        text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
      }],
    }),
  );
  if (ctx.era === 'legacy') {
    // resources/subscribe + unsubscribe exist on the 2025 era only (removed in
    // 2026-07-28, where subscriptions/listen replaces them).
    mcp.server.setRequestHandler('resources/subscribe', async () => ({}));
    mcp.server.setRequestHandler('resources/unsubscribe', async () => ({}));
  }

  // ----- prompts -----------------------------------------------------------------
  mcp.registerPrompt('test_simple_prompt', { description: 'A simple prompt without arguments' }, async () => ({
    messages: [{ role: 'user', content: text('This is a simple prompt for testing.') }],
  }));
  mcp.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two required arguments',
      argsSchema: z.object({
        arg1: completable(z.string().describe('First test argument'),
          (value) => ['paris', 'park', 'party', 'test', 'testing'].filter((v) => v.startsWith(value ?? ''))),
        arg2: z.string().describe('Second test argument'),
      }),
    },
    async ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: text(`Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`) }],
    }),
  );
  mcp.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      description: 'A prompt that embeds a resource',
      argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') }),
    },
    async ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } },
        },
        { role: 'user', content: text('Please process the embedded resource above.') },
      ],
    }),
  );
  mcp.registerPrompt('test_prompt_with_image', { description: 'A prompt with image content' }, async () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG_1X1, mimeType: 'image/png' } },
      { role: 'user', content: text('Please analyze the image above.') },
    ],
  }));
  // (A prompt without argsSchema gets the context as its only argument.)
  mcp.registerPrompt('test_input_required_result_prompt', { description: 'Asks for context via input_required first' },
    async (c) => {
      const context = acceptedContent(c.mcpReq.inputResponses, 'user_context')?.context;
      if (typeof context !== 'string') {
        return inputRequired({
          inputRequests: {
            user_context: inputRequired.elicit({
              message: 'What context should the prompt use?',
              requestedSchema: objectSchema({ context: { type: 'string' } }),
            }),
          },
        });
      }
      return { messages: [{ role: 'user', content: text(`Prompt using context: ${context}`) }] };
    });

  return mcp;
}

// ---------------------------------------------------------------------------
// Legacy (2025) sessions over HTTP.
// ---------------------------------------------------------------------------
class MemoryEventStore {
  constructor() { this.events = []; this.seq = 0; }
  async storeEvent(streamId, message) {
    const eventId = `${streamId}_${String(++this.seq).padStart(8, '0')}`;
    this.events.push({ eventId, streamId, message });
    return eventId;
  }
  async getStreamIdForEventId(eventId) {
    return this.events.find((e) => e.eventId === eventId)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const last = this.events.find((e) => e.eventId === lastEventId);
    if (!last) throw new Error(`unknown event id ${lastEventId}`);
    for (const e of this.events) {
      if (e.streamId === last.streamId && e.eventId > lastEventId && Object.keys(e.message).length > 0) {
        await send(e.eventId, e.message);
      }
    }
    return last.streamId;
  }
}

const jsonError = (status, code, message, id = null) =>
  new Response(JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } }), {
    status, headers: { 'content-type': 'application/json' },
  });

function sessionfulLegacy() {
  const sessions = new Map(); // id -> { transport, mcp, protocolVersion }
  return async (request, body) => {
    const sid = request.headers.get('mcp-session-id');
    if (sid) {
      const session = sessions.get(sid);
      if (!session) return jsonError(404, -32001, 'Session not found');
      // The suite's raw SSE probes (server-sse-polling, -multiple-streams)
      // send `mcp-protocol-version: 2025-03-26` on a session that negotiated
      // 2025-11-25; the SDK would then skip the SEP-1699 priming event. The
      // session's negotiated version is authoritative here.
      const header = request.headers.get('mcp-protocol-version');
      if (session.protocolVersion && header && header < session.protocolVersion) {
        const headers = new Headers(request.headers);
        headers.set('mcp-protocol-version', session.protocolVersion);
        request = new Request(request.url, { method: request.method, headers, body: body ?? undefined, signal: request.signal });
      }
      return session.transport.handleRequest(request, body === undefined ? {} : { parsedBody: safeParse(body) });
    }
    const parsed = body === undefined ? undefined : safeParse(body);
    if (request.method !== 'POST' || !isInitializeRequest(parsed)) {
      return jsonError(400, -32000, 'Bad Request: missing session id');
    }
    const mcp = buildServer({ era: 'legacy' });
    const session = { mcp, transport: null, protocolVersion: null };
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new MemoryEventStore(),
      retryInterval: 500,
      onsessioninitialized: (id) => {
        sessions.set(id, session);
        state.connectedServers.add(mcp);
        log(`legacy session ${id} initialized`);
      },
    });
    session.transport = transport;
    const requested = parsed?.params?.protocolVersion;
    session.protocolVersion = SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION;
    transport.onclose = () => {
      if (transport.sessionId && sessions.delete(transport.sessionId)) {
        log(`legacy session ${transport.sessionId} closed`);
        state.connectedServers.delete(mcp);
        mcp.close().catch(() => {});
      }
    };
    await mcp.connect(transport);
    return transport.handleRequest(request, { parsedBody: parsed });
  };
}

function safeParse(text) {
  try { return JSON.parse(text); } catch { return undefined; }
}

// ---------------------------------------------------------------------------
// node:http <-> web Request/Response.
// ---------------------------------------------------------------------------
async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks);
}

function toWebRequest(req, body, port, abort) {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  const host = req.headers.host ?? `127.0.0.1:${port}`;
  const hasBody = !['GET', 'HEAD'].includes(req.method) && body.length > 0;
  return new Request(`http://${host}${req.url}`, {
    method: req.method, headers, body: hasBody ? body : undefined, signal: abort.signal,
  });
}

async function sendWebResponse(res, response) {
  const headers = {};
  response.headers.forEach((v, k) => {
    headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
  });
  res.writeHead(response.status, headers);
  if (!response.body) { res.end(); return; }
  if (res.socket) res.socket.setNoDelay(true);
  const reader = response.body.getReader();
  res.on('close', () => reader.cancel().catch(() => {}));
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      res.write(value);
    }
  } catch {
    // client went away
  }
  res.end();
}

async function runHttp(port, legacyMode, responseMode) {
  const modern = createMcpHandler(buildServer, {
    legacy: legacyMode === 'stateless' ? 'stateless' : 'reject',
    responseMode,
    onerror: (err) => log('modern handler:', err?.message ?? err),
  });
  state.modern = modern;
  const legacy = legacyMode === 'sessionful' ? sessionfulLegacy() : null;

  const httpServer = createHttpServer(async (req, res) => {
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    try {
      const path = (req.url ?? '').split('?')[0];
      if (path !== '/mcp') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        return;
      }
      const body = await readBody(req);
      const request = toWebRequest(req, body, port, abort);
      // DNS-rebinding protection for a localhost server: Host, then Origin.
      const rejected =
        hostHeaderValidationResponse(request, localhostAllowedHostnames()) ??
        originValidationResponse(request, localhostAllowedOrigins());
      if (rejected) {
        await sendWebResponse(res, rejected);
        return;
      }
      let response;
      if (legacy && (await isLegacyRequest(request))) {
        response = await legacy(request, body.length > 0 ? body.toString('utf8') : undefined);
      } else {
        const msg = req.method === 'POST' ? safeParse(body.toString('utf8')) : undefined;
        const reply = options.tasks && isModern(msg) ? await answerTasks(msg, request.headers, stateCodec) : null;
        response = reply
          ? new Response(JSON.stringify(reply.body), { status: reply.status, headers: { 'content-type': 'application/json' } })
          : await modern.fetch(request);
      }
      await sendWebResponse(res, response);
    } catch (err) {
      log('error handling request:', err);
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: 'Internal server error' } }));
      } else {
        res.end();
      }
    }
  });
  httpServer.on('error', (err) => { log('listen failed:', err.message); process.exit(1); });
  httpServer.listen(port, '127.0.0.1', () => {
    port = httpServer.address().port;
    log(`listening on http://127.0.0.1:${port}/mcp (legacy: ${legacyMode}, response mode: ${responseMode}, skills: ${options.skills}, tasks: ${options.tasks})`);
  });
  const shutdown = async () => {
    await modern.close().catch(() => {});
    httpServer.close();
    process.exit(0);
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

// For mcp-warden's tests of a held subscription it ends: on stdio the only
// way to end a `subscriptions/listen` is `notifications/cancelled` naming its
// id, so this counts the cancellations that name a listen still open under
// the id this process was sent it with (a cancellation under any other id,
// the client's own say, ends nothing and is not counted).
class ListenCancels {
  constructor(inner) {
    this.inner = inner;
    this.open = new Set();
    inner.onclose = () => this.onclose?.();
    inner.onerror = (e) => this.onerror?.(e);
    inner.onmessage = (m, extra) => {
      if (m?.method === 'subscriptions/listen' && m.id !== undefined) this.open.add(JSON.stringify(m.id));
      if (m?.method === 'notifications/cancelled' && this.open.delete(JSON.stringify(m.params?.requestId))) {
        COUNTERS.listensCancelled += 1;
      }
      this.onmessage?.(m, extra);
    };
  }
  start() { return this.inner.start(); }
  close() { return this.inner.close(); }
  send(m, o) {
    // Answered: the subscription is over, a later cancellation ends nothing.
    if (m?.id !== undefined && m.method === undefined) this.open.delete(JSON.stringify(m.id));
    return this.inner.send(m, o);
  }
  get sessionId() { return this.inner.sessionId; }
}

async function runStdio(legacyMode) {
  const { serveStdio, StdioServerTransport } = await import('@modelcontextprotocol/server/stdio');
  const stdio = new ListenCancels(new StdioServerTransport());
  const transport = options.tasks ? new TasksTransport(stdio, stateCodec, log) : stdio;
  const handle = serveStdio((ctx) => {
    const mcp = buildServer(ctx);
    state.connectedServers.add(mcp);
    return mcp;
  }, {
    legacy: legacyMode === 'reject' ? 'reject' : 'serve',
    transport,
    onerror: (err) => log('stdio:', err?.message ?? err),
  });
  log(`serving on stdio (legacy: ${legacyMode})`);
  const shutdown = async () => { await handle.close().catch(() => {}); process.exit(0); };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

// ---------------------------------------------------------------------------
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};
if (argv.includes('--no-skills')) options.skills = false;
if (argv.includes('--no-tasks')) options.tasks = false;
if (argv[0] === '--stdio') {
  const mode = opt('--legacy', 'serve');
  if (!['serve', 'reject'].includes(mode)) { console.error('--stdio: --legacy serve|reject'); process.exit(2); }
  runStdio(mode).catch((err) => { log(err); process.exit(1); });
} else if (argv[0] === '--http' && /^\d+$/.test(argv[1] ?? '')) {
  const mode = opt('--legacy', 'sessionful');
  if (!['sessionful', 'stateless', 'reject'].includes(mode)) {
    console.error('--http: --legacy sessionful|stateless|reject'); process.exit(2);
  }
  const responseMode = opt('--response-mode', 'auto');
  if (!['auto', 'sse', 'json'].includes(responseMode)) {
    console.error('--http: --response-mode auto|sse|json'); process.exit(2);
  }
  runHttp(Number(argv[1]), mode, responseMode).catch((err) => { log(err); process.exit(1); });
} else {
  console.error('usage: modern-fixture-server.mjs --http PORT [--legacy sessionful|stateless|reject] [--response-mode auto|sse|json] [--no-skills] [--no-tasks]\n'
    + '       modern-fixture-server.mjs --stdio [--legacy serve|reject] [--no-skills] [--no-tasks]');
  process.exit(2);
}
