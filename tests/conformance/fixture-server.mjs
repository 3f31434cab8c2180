#!/usr/bin/env node
// MCP conformance fixture server for mcp-warden's tests.
//
// Implements every tool, resource and prompt that the *active* server
// scenarios of @modelcontextprotocol/conformance call (test_* tools,
// test://... resources, test_* prompts), written against the official
// TypeScript SDK. The suite runs against it directly and through the facade.
//
//   node fixture-server.mjs --http PORT   Streamable HTTP on 127.0.0.1:PORT/mcp
//                                         (stateful: one McpServer per session,
//                                         resumable SSE streams, DNS-rebinding
//                                         protection, SSE retry hint)
//   node fixture-server.mjs --stdio       stdio transport (one session)
//
// Logs go to stderr only (stdout is the stdio transport).

import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  isInitializeRequest,
  LATEST_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';

const log = (...args) => console.error('[fixture]', ...args);

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
const text = (t) => ({ type: 'text', text: t });
const EMPTY_OBJECT_SCHEMA = { type: 'object', properties: {} };

// ---------------------------------------------------------------------------
// Tools. Declared with raw JSON Schemas (served verbatim by tools/list, so the
// JSON Schema 2020-12 keywords of json-schema-2020-12 survive untouched).
// ---------------------------------------------------------------------------
function defineTools(mcp) {
  const server = mcp.server; // low-level Server: request(), isMessageIgnored(), ...

  // A notification/request related to the current tools/call, so it travels on
  // that call's response stream (HTTP) like the spec prefers.
  const logInfo = async (extra, message) => {
    if (server.isMessageIgnored('info', extra.sessionId)) return;
    await extra.sendNotification({
      method: 'notifications/message',
      params: { level: 'info', logger: 'conformance-fixture', data: message },
    });
  };

  const elicit = async (extra, params) => {
    if (!server.getClientCapabilities()?.elicitation) {
      throw new McpError(ErrorCode.InvalidRequest, 'client does not support elicitation');
    }
    return server.elicitInput(params, { relatedRequestId: extra.requestId });
  };

  return [
    {
      name: 'test_simple_text',
      description: 'Returns a simple text content block',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async () => ({ content: [text('This is a simple text response for testing.')] }),
    },
    {
      name: 'test_image_content',
      description: 'Returns an image content block (1x1 PNG)',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async () => ({ content: [{ type: 'image', data: PNG_1X1, mimeType: 'image/png' }] }),
    },
    {
      name: 'test_audio_content',
      description: 'Returns an audio content block (empty WAV)',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async () => ({ content: [{ type: 'audio', data: WAV_EMPTY, mimeType: 'audio/wav' }] }),
    },
    {
      name: 'test_embedded_resource',
      description: 'Returns an embedded text resource',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async () => ({
        content: [{
          type: 'resource',
          resource: {
            uri: 'test://embedded-resource',
            mimeType: 'text/plain',
            text: 'This is an embedded resource content.',
          },
        }],
      }),
    },
    {
      name: 'test_multiple_content_types',
      description: 'Returns text, image and embedded resource content together',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async () => ({
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
      }),
    },
    {
      name: 'test_tool_with_logging',
      description: 'Sends three info log notifications while it runs',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async (_args, extra) => {
        await logInfo(extra, 'Tool execution started');
        await sleep(50);
        await logInfo(extra, 'Tool processing data');
        await sleep(50);
        await logInfo(extra, 'Tool execution completed');
        return { content: [text('Tool with logging executed successfully')] };
      },
    },
    {
      name: 'test_tool_with_progress',
      description: 'Reports progress 0, 50, 100 of 100 when given a progressToken',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async (_args, extra) => {
        const token = extra._meta?.progressToken;
        for (const progress of [0, 50, 100]) {
          if (token !== undefined) {
            await extra.sendNotification({
              method: 'notifications/progress',
              params: { progressToken: token, progress, total: 100, message: `step ${progress}/100` },
            });
          }
          if (progress < 100) await sleep(50);
        }
        return { content: [text(`Progress tool completed (token: ${token ?? 'none'})`)] };
      },
    },
    {
      name: 'test_error_handling',
      description: 'Always fails with isError: true',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async () => ({
        isError: true,
        content: [text('This tool intentionally returns an error for testing')],
      }),
    },
    {
      name: 'test_sampling',
      description: 'Asks the client for an LLM completion (sampling/createMessage)',
      inputSchema: {
        type: 'object',
        properties: { prompt: { type: 'string', description: 'The prompt to send to the LLM' } },
        required: ['prompt'],
      },
      run: async (args, extra) => {
        if (!server.getClientCapabilities()?.sampling) {
          throw new McpError(ErrorCode.InvalidRequest, 'client does not support sampling');
        }
        const result = await server.createMessage(
          {
            messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt) } }],
            maxTokens: 100,
          },
          { relatedRequestId: extra.requestId },
        );
        const reply = Array.isArray(result.content)
          ? result.content.map((c) => c.text ?? '').join('')
          : result.content?.text ?? JSON.stringify(result.content);
        return { content: [text(`LLM response: ${reply}`)] };
      },
    },
    {
      name: 'test_elicitation',
      description: 'Asks the client for user input (elicitation/create)',
      inputSchema: {
        type: 'object',
        properties: { message: { type: 'string', description: 'The message to show the user' } },
        required: ['message'],
      },
      run: async (args, extra) => {
        const result = await elicit(extra, {
          message: String(args.message),
          requestedSchema: {
            type: 'object',
            properties: {
              username: { type: 'string', description: "User's response" },
              email: { type: 'string', description: "User's email address" },
            },
            required: ['username', 'email'],
          },
        });
        return {
          content: [text(`User response: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)],
        };
      },
    },
    {
      name: 'test_elicitation_sep1034_defaults',
      description: 'Elicitation whose schema has defaults for every primitive type (SEP-1034)',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async (_args, extra) => {
        const result = await elicit(extra, {
          message: 'Please review the fields (defaults provided)',
          requestedSchema: {
            type: 'object',
            properties: {
              name: { type: 'string', description: 'User name', default: 'John Doe' },
              age: { type: 'integer', description: 'User age', default: 30 },
              score: { type: 'number', description: 'User score', default: 95.5 },
              status: {
                type: 'string', description: 'User status',
                enum: ['active', 'inactive', 'pending'], default: 'active',
              },
              verified: { type: 'boolean', description: 'Verification status', default: true },
            },
            required: [],
          },
        });
        return {
          content: [text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)],
        };
      },
    },
    {
      name: 'test_elicitation_sep1330_enums',
      description: 'Elicitation with all five enum schema variants (SEP-1330)',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async (_args, extra) => {
        const result = await elicit(extra, {
          message: 'Please pick options',
          requestedSchema: {
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
              untitledMulti: {
                type: 'array',
                items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
              },
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
          },
        });
        return {
          content: [text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)],
        };
      },
    },
    {
      name: 'json_schema_2020_12_tool',
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: {
          address: {
            type: 'object',
            properties: { street: { type: 'string' }, city: { type: 'string' } },
          },
        },
        properties: {
          name: { type: 'string' },
          address: { $ref: '#/$defs/address' },
        },
        additionalProperties: false,
      },
      run: async (args) => ({ content: [text(`json_schema_2020_12_tool called with ${JSON.stringify(args)}`)] }),
    },
    {
      // SEP-1699 (server-sse-polling): close the POST SSE stream mid-call; the
      // result is stored in the event store and delivered when the client
      // reconnects with GET + Last-Event-ID. Over stdio it simply returns.
      name: 'test_reconnection',
      description: 'Closes its SSE stream mid-call; the result arrives after the client reconnects',
      inputSchema: EMPTY_OBJECT_SCHEMA,
      run: async (_args, extra) => {
        if (extra.closeSSEStream) {
          log(`test_reconnection: closing SSE stream of request ${extra.requestId}`);
          extra.closeSSEStream();
          await sleep(100);
        }
        return { content: [text('Reconnection test completed successfully')] };
      },
    },
  ];
}

// ---------------------------------------------------------------------------
// One McpServer per session.
// ---------------------------------------------------------------------------
function createServer() {
  const mcp = new McpServer(
    { name: 'mcp-warden-conformance-fixture', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
      instructions: 'Conformance fixture for mcp-warden tests.',
    },
  );

  // Tools via the low-level handlers (no registerTool, so no conflict).
  const tools = defineTools(mcp);
  const byName = new Map(tools.map((t) => [t.name, t]));
  mcp.server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema })),
  }));
  mcp.server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = byName.get(request.params.name);
    if (!tool) {
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    }
    try {
      return await tool.run(request.params.arguments ?? {}, extra);
    } catch (err) {
      return { isError: true, content: [text(`${tool.name} failed: ${err?.message ?? err}`)] };
    }
  });

  // Resources.
  const resource = (name, uri, mimeType, description, body) =>
    mcp.registerResource(name, uri, { title: name, description, mimeType }, async () => ({
      contents: [{ uri, mimeType, ...body }],
    }));
  resource('static-text', 'test://static-text', 'text/plain', 'A static text resource',
    { text: 'This is the content of the static text resource.' });
  resource('static-binary', 'test://static-binary', 'image/png', 'A static binary resource (PNG)',
    { blob: PNG_1X1 });
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
  const subscriptions = new Set();
  mcp.server.setRequestHandler(SubscribeRequestSchema, async (req) => {
    subscriptions.add(req.params.uri);
    return {};
  });
  mcp.server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
    subscriptions.delete(req.params.uri);
    return {};
  });

  // Prompts.
  mcp.registerPrompt('test_simple_prompt', { description: 'A simple prompt without arguments' }, async () => ({
    messages: [{ role: 'user', content: text('This is a simple prompt for testing.') }],
  }));
  mcp.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two required arguments',
      argsSchema: {
        arg1: completable(z.string().describe('First test argument'),
          (value) => ['paris', 'park', 'party', 'test', 'testing'].filter((v) => v.startsWith(value ?? ''))),
        arg2: z.string().describe('Second test argument'),
      },
    },
    async ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: text(`Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`) }],
    }),
  );
  mcp.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      description: 'A prompt that embeds a resource',
      argsSchema: { resourceUri: z.string().describe('URI of the resource to embed') },
    },
    async ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' },
          },
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

  return mcp;
}

// ---------------------------------------------------------------------------
// Transports.
// ---------------------------------------------------------------------------

// In-memory event store (SEP-1699 resumability), one per session.
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

async function runStdio() {
  const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
  const mcp = createServer();
  await mcp.connect(new StdioServerTransport());
  log('serving on stdio');
}

async function runHttp(port) {
  const { createMcpExpressApp } = await import('@modelcontextprotocol/sdk/server/express.js');
  const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');

  // Host-header (DNS-rebinding) protection for 127.0.0.1 is built in here.
  const app = createMcpExpressApp({ host: '127.0.0.1' });
  const sessions = new Map(); // id -> { transport, server, protocolVersion }

  // The suite's raw SSE probes (server-sse-polling, server-sse-multiple-streams)
  // send `mcp-protocol-version: 2025-03-26` on a session that negotiated
  // 2025-11-25; the SDK would then skip the SEP-1699 priming event. The
  // session's negotiated version is authoritative here.
  const fixVersionHeader = (req, session) => {
    const header = req.headers['mcp-protocol-version'];
    if (session.protocolVersion && header && header < session.protocolVersion) {
      req.headers['mcp-protocol-version'] = session.protocolVersion;
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        if (req.rawHeaders[i].toLowerCase() === 'mcp-protocol-version') req.rawHeaders[i + 1] = session.protocolVersion;
      }
    }
  };

  app.all('/mcp', async (req, res) => {
    const sid = req.headers['mcp-session-id'];
    try {
      if (sid) {
        const session = sessions.get(sid);
        if (!session) {
          res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
          return;
        }
        fixVersionHeader(req, session);
        await session.transport.handleRequest(req, res, req.body);
        return;
      }
      if (req.method !== 'POST' || !isInitializeRequest(req.body)) {
        res.status(400).json({
          jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: missing session id' }, id: null,
        });
        return;
      }
      const server = createServer();
      const session = { server, transport: null, protocolVersion: null };
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new MemoryEventStore(),
        retryInterval: 500,
        onsessioninitialized: (id) => {
          sessions.set(id, session);
          log(`session ${id} initialized`);
        },
      });
      session.transport = transport;
      // The version the server answers initialize with (SDK negotiation rule).
      const requested = req.body?.params?.protocolVersion;
      session.protocolVersion = SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION;
      transport.onclose = () => {
        if (transport.sessionId && sessions.delete(transport.sessionId)) {
          log(`session ${transport.sessionId} closed`);
          server.close().catch(() => {});
        }
      };
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } catch (err) {
      log('error handling request:', err);
      if (!res.headersSent) {
        res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
      }
    }
  });

  const httpServer = app.listen(port, '127.0.0.1', () => {
    log(`serving Streamable HTTP on http://127.0.0.1:${httpServer.address().port}/mcp`);
  });
  httpServer.on('error', (err) => { log('listen failed:', err.message); process.exit(1); });
  const shutdown = async () => {
    for (const { transport } of sessions.values()) await transport.close().catch(() => {});
    httpServer.close();
    process.exit(0);
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

const argv = process.argv.slice(2);
if (argv[0] === '--stdio') {
  runStdio().catch((err) => { log(err); process.exit(1); });
} else if (argv[0] === '--http' && /^\d+$/.test(argv[1] ?? '')) {
  runHttp(Number(argv[1])).catch((err) => { log(err); process.exit(1); });
} else {
  console.error('usage: fixture-server.mjs --http PORT | --stdio');
  process.exit(2);
}
