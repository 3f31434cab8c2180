// The tasks extension (`io.modelcontextprotocol/tasks`, protocol 2026-07-28)
// for modern-fixture-server.mjs, written by hand on the extension's text: the
// TypeScript SDK 2.4 has no runtime for it (its task vocabulary is the
// 2025-11-25 one). The fixture hands every 2026-07-28 request to `answer`
// first; a request that is not about tasks gets `null` back and goes on to
// the SDK.
//
// What the conformance suite's tasks-* scenarios (0.2.0-alpha.12) call:
//   greet               sync only (served by the SDK; listed in buildServer)
//   slow_compute        optional task: sleeps `seconds`, then "computed LABEL in Ns";
//                       settles to `cancelled` on tasks/cancel while running
//   failing_job         required task: completes with a tool error after ~1 s
//   protocol_error_job  required task: fails with a JSON-RPC error
//   confirm_delete      optional task: one elicitation, then completes
//   multi_input         optional task: two elicitations pending at once
//   ask_roots           optional task: asks only roots/list, then completes
//                       with "roots: URI, ..." (the roots it was given)
//   test_tool_with_task required task: one multi-round-trip round asking for
//                       a name (requestState minted by the fixture's codec),
//                       then a task whose result names it
// plus tasks/get (pure read), tasks/update (inputResponses, partial answers),
// tasks/cancel (idempotent ack), -32021 for callers that did not declare the
// extension, -32602 for unknown ids, -32601 for the removed tasks/result and
// tasks/list, and the SEP-2243 header checks (-32020) on what it answers.
//
// `tasks_fixture_stats` (always sync) reports how many tasks were created,
// cancelled and left running, so end-to-end tests can see what reached the
// server (e.g. a cancel the facade sent on its own).

import { randomUUID } from 'node:crypto';

export const TASKS = 'io.modelcontextprotocol/tasks';
const META_CAPS = 'io.modelcontextprotocol/clientCapabilities';
const META_VERSION = 'io.modelcontextprotocol/protocolVersion';
const TTL_MS = 60_000;
const POLL_MS = 100;
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

// Which tools make tasks, and whether a caller without the extension may
// still run them synchronously ('optional', served by the SDK) or not.
export const TASK_TOOLS = {
  slow_compute: 'optional',
  failing_job: 'required',
  protocol_error_job: 'required',
  confirm_delete: 'optional',
  multi_input: 'optional',
  ask_roots: 'optional',
  test_tool_with_task: 'required',
};

const tasks = new Map(); // taskId -> task record
export const STATS = { created: 0, cancelled: 0, cancelRequests: 0 };

const now = () => new Date().toISOString();
const text = (t) => ({ type: 'text', text: t });
const elicit = (message, properties) => ({
  method: 'elicitation/create',
  params: { mode: 'form', message, requestedSchema: { type: 'object', properties, required: Object.keys(properties) } },
});

class Reply {
  constructor(id, body, status = 200) { this.id = id; this.body = body; this.status = status; }
  static result(id, result) { return new Reply(id, { jsonrpc: '2.0', id, result }); }
  static error(id, code, message, data, status = 200) {
    const error = data === undefined ? { code, message } : { code, message, data };
    return new Reply(id, { jsonrpc: '2.0', id, error }, status);
  }
}

const declared = (params) => {
  const caps = params?._meta?.[META_CAPS];
  return !!(caps && typeof caps === 'object' && caps.extensions && typeof caps.extensions === 'object'
    && caps.extensions[TASKS] !== undefined);
};
const missingCapability = (id, what) => Reply.error(
  id, -32021, `${what} needs the ${TASKS} extension`,
  { requiredCapabilities: { extensions: { [TASKS]: {} } } }, 400);

/// A 2026-07-28 request: carries the per-request protocol version claim.
export function isModern(msg) {
  return !!msg?.params?._meta?.[META_VERSION];
}

function view(task) {
  const { taskId, status, statusMessage, createdAt, lastUpdatedAt, ttlMs, pollIntervalMs } = task;
  const v = { taskId, status, createdAt, lastUpdatedAt, ttlMs, pollIntervalMs };
  if (statusMessage) v.statusMessage = statusMessage;
  return v;
}

function settle(task, status, outcome = {}) {
  if (TERMINAL.has(task.status)) return;
  clearTimeout(task.timer);
  task.status = status;
  task.lastUpdatedAt = now();
  if (outcome.result) task.result = outcome.result;
  if (outcome.error) task.error = outcome.error;
  task.inputRequests = {};
}

function create(tool, work) {
  const t = now();
  const task = {
    taskId: randomUUID(), tool, status: 'working', createdAt: t, lastUpdatedAt: t,
    ttlMs: TTL_MS, pollIntervalMs: POLL_MS, inputRequests: {}, answers: {}, timer: null,
  };
  tasks.set(task.taskId, task);
  STATS.created += 1;
  setTimeout(() => tasks.delete(task.taskId), TTL_MS * 2).unref();
  work(task);
  return task;
}

const later = (task, ms, fn) => { task.timer = setTimeout(fn, ms); };

function ask(task, requests, then) {
  task.status = 'input_required';
  task.lastUpdatedAt = now();
  task.inputRequests = requests;
  task.resume = then;
}

// The work each task-making tool does once its task exists.
const WORK = {
  slow_compute: (args) => (task) => {
    const seconds = Number.isFinite(args?.seconds) ? Math.max(0, args.seconds) : 1;
    const label = typeof args?.label === 'string' ? args.label : 'job';
    later(task, seconds * 1000, () => settle(task, 'completed', {
      result: { content: [text(`computed ${label} in ${seconds}s`)], isError: false },
    }));
  },
  failing_job: () => (task) => later(task, 1000, () => settle(task, 'completed', {
    result: { content: [text('failing_job: the job reported an error')], isError: true },
  })),
  protocol_error_job: () => (task) => later(task, 300, () => settle(task, 'failed', {
    error: { code: -32603, message: 'protocol_error_job: internal failure' },
  })),
  confirm_delete: (args) => (task) => {
    const filename = typeof args?.filename === 'string' ? args.filename : 'file';
    ask(task, { [`confirm-${randomUUID().slice(0, 8)}`]: elicit(`Delete ${filename}?`, { confirm: { type: 'boolean' } }) },
      (answers) => {
        const a = Object.values(answers)[0];
        const yes = a?.action === 'accept' && a?.content?.confirm === true;
        task.status = 'working';
        later(task, 100, () => settle(task, 'completed', {
          result: { content: [text(yes ? `deleted ${filename}` : `kept ${filename}`)], isError: false },
        }));
      });
  },
  multi_input: () => (task) => {
    ask(task, {
      first: elicit('First value?', { name: { type: 'string' } }),
      second: elicit('Second value?', { name: { type: 'string' } }),
    }, (answers) => {
      const names = ['first', 'second'].map((k) => answers[k]?.content?.name ?? '?');
      task.status = 'working';
      later(task, 100, () => settle(task, 'completed', {
        result: { content: [text(`got ${names.join(' and ')}`)], isError: false },
      }));
    });
  },
  ask_roots: () => (task) => {
    ask(task, { client_roots: { method: 'roots/list', params: {} } }, (answers) => {
      const roots = answers.client_roots?.roots;
      const listed = Array.isArray(roots) ? roots.map((r) => r?.uri).join(', ') : '(none)';
      task.status = 'working';
      later(task, 100, () => settle(task, 'completed', {
        result: { content: [text(`roots: ${listed}`)], isError: false },
      }));
    });
  },
  test_tool_with_task: (args, name) => (task) => later(task, 300, () => settle(task, 'completed', {
    result: { content: [text(`Hello, ${name}! (from a task)`)], isError: false },
  })),
};

function headerMismatch(id, headers, method, name) {
  if (!headers) return null; // stdio: no headers to check
  const m = headers.get('mcp-method');
  if (m !== null && m.trim() !== method) {
    return Reply.error(id, -32020, `Mcp-Method header ${JSON.stringify(m)} does not match ${method}`, undefined, 400);
  }
  const n = headers.get('mcp-name');
  if (name !== undefined && (n === null || n.trim() !== name)) {
    return Reply.error(id, -32020, `Mcp-Name header ${JSON.stringify(n)} does not match ${JSON.stringify(name)}`, undefined, 400);
  }
  return null;
}

async function toolsCall(msg, headers, codec) {
  const { id, params } = msg;
  const tool = params?.name;
  const support = TASK_TOOLS[tool];
  if (!support) return null;
  if (!declared(params)) {
    // An optional tool runs synchronously in the SDK for such a caller.
    return support === 'required' ? missingCapability(id, `tool ${tool}`) : null;
  }
  const bad = headerMismatch(id, headers, 'tools/call', tool);
  if (bad) return bad;
  const args = params.arguments ?? {};
  if (tool === 'test_tool_with_task') {
    // One multi-round-trip round before the task: ask for the name, then
    // make the task once the answer comes back with intact state.
    const answer = params.inputResponses?.user_name;
    const name = answer?.action === 'accept' ? answer?.content?.name : undefined;
    let stateOk = false;
    if (typeof params.requestState === 'string') {
      try { stateOk = (await codec.verify(params.requestState))?.tool === 'with_task'; } catch { stateOk = false; }
    }
    if (typeof name !== 'string' || !stateOk) {
      if (params.requestState !== undefined && !stateOk && name !== undefined) {
        return Reply.error(id, -32602, 'requestState is not one this server minted');
      }
      return Reply.result(id, {
        resultType: 'input_required',
        inputRequests: { user_name: elicit('What is your name?', { name: { type: 'string' } }) },
        requestState: await codec.mint({ tool: 'with_task' }),
      });
    }
    return Reply.result(id, { resultType: 'task', ...view(create(tool, WORK[tool](args, name))) });
  }
  return Reply.result(id, { resultType: 'task', ...view(create(tool, WORK[tool](args))) });
}

function tasksMethod(msg, headers) {
  const { id, method, params } = msg;
  if (!declared(params)) return missingCapability(id, method);
  const taskId = params?.taskId;
  if (typeof taskId !== 'string') return Reply.error(id, -32602, 'taskId must be a string');
  const bad = headerMismatch(id, headers, method, taskId);
  if (bad) return bad;
  const task = tasks.get(taskId);
  if (!task) return Reply.error(id, -32602, `unknown task ${JSON.stringify(taskId)}`);
  if (method === 'tasks/get') {
    const r = { resultType: 'complete', ...view(task) };
    if (task.status === 'input_required') r.inputRequests = task.inputRequests;
    if (task.status === 'completed') r.result = task.result;
    if (task.status === 'failed') r.error = task.error;
    return Reply.result(id, r);
  }
  if (method === 'tasks/cancel') {
    STATS.cancelRequests += 1;
    if (!TERMINAL.has(task.status)) {
      STATS.cancelled += 1;
      settle(task, 'cancelled');
    }
    return Reply.result(id, { resultType: 'complete' });
  }
  // tasks/update: answers to pending keys; unknown or answered keys are ignored.
  const responses = params.inputResponses;
  if (!responses || typeof responses !== 'object' || Array.isArray(responses)) {
    return Reply.error(id, -32602, 'inputResponses must be an object');
  }
  if (task.status === 'input_required') {
    for (const [k, v] of Object.entries(responses)) {
      if (k in task.inputRequests) {
        task.answers[k] = v;
        delete task.inputRequests[k];
      }
    }
    task.lastUpdatedAt = now();
    if (Object.keys(task.inputRequests).length === 0) task.resume(task.answers);
  }
  return Reply.result(id, { resultType: 'complete' });
}

/// The answer to a 2026-07-28 request if it is about tasks, else null.
/// `headers` (a Headers, or null over stdio) are checked on what is answered.
export async function answer(msg, headers, codec) {
  if (!msg || typeof msg !== 'object' || msg.id === undefined || typeof msg.method !== 'string') return null;
  switch (msg.method) {
    case 'tools/call': return toolsCall(msg, headers, codec);
    case 'tasks/get':
    case 'tasks/update':
    case 'tasks/cancel': return tasksMethod(msg, headers);
    case 'tasks/result':
    case 'tasks/list': return Reply.error(msg.id, -32601, `${msg.method} does not exist in this revision`);
    default: return null;
  }
}

/// Registers the task tools on an SDK server so they are listed, with the
/// synchronous behaviour a caller without the extension gets.
export function registerTaskTools(mcp, json, sleep) {
  const ARGS = (props) => json({ type: 'object', properties: props });
  mcp.registerTool('greet', { description: 'Sync only: Hello, {name}!', inputSchema: ARGS({ name: { type: 'string' } }) },
    async ({ name }) => ({ content: [text(`Hello, ${name ?? 'World'}!`)] }));
  mcp.registerTool('slow_compute', {
    description: 'Task-supporting: sleeps `seconds`, then reports the label',
    inputSchema: ARGS({ seconds: { type: 'number' }, label: { type: 'string' } }),
  }, async ({ seconds, label }) => {
    const s = Number.isFinite(seconds) ? Math.max(0, seconds) : 1;
    await sleep(s * 1000);
    return { content: [text(`computed ${label ?? 'job'} in ${s}s`)] };
  });
  const taskOnly = (name, description, props = {}) => mcp.registerTool(name, { description, inputSchema: ARGS(props) },
    async () => ({ content: [text(`${name} runs only as a task`)], isError: true }));
  taskOnly('failing_job', 'Task required: completes with a tool error');
  taskOnly('protocol_error_job', 'Task required: fails with a protocol error');
  taskOnly('test_tool_with_task', 'Task required: asks for a name, then runs as a task');
  mcp.registerTool('confirm_delete', {
    description: 'Task-supporting: asks for confirmation, then deletes', inputSchema: ARGS({ filename: { type: 'string' } }),
  }, async ({ filename }) => ({ content: [text(`kept ${filename ?? 'file'}`)] }));
  mcp.registerTool('multi_input', { description: 'Task-supporting: asks two questions at once', inputSchema: ARGS({}) },
    async () => ({ content: [text('got ? and ?')] }));
  mcp.registerTool('ask_roots', { description: 'Task-supporting: asks for the roots, then lists them', inputSchema: ARGS({}) },
    async () => ({ content: [text('roots: (not asked outside a task)')] }));
  mcp.registerTool('tasks_fixture_stats', { description: 'Tasks this process created and cancelled', inputSchema: ARGS({}) },
    async () => {
      const running = [...tasks.values()].filter((t) => !TERMINAL.has(t.status)).length;
      return { content: [text(JSON.stringify({ ...STATS, running }))] };
    });
}

/// A Transport that answers task requests itself and passes the rest to the
/// SDK (serveStdio takes it in place of its own stdio transport).
export class TasksTransport {
  constructor(inner, codec, log) {
    this.inner = inner;
    this.codec = codec;
    this.log = log;
    inner.onclose = () => this.onclose?.();
    inner.onerror = (e) => this.onerror?.(e);
    // Messages reach the SDK in the order they came (the first one picks
    // the connection's era), so each waits for the one before it.
    this.queue = Promise.resolve();
    inner.onmessage = (m, extra) => {
      this.queue = this.queue.then(async () => {
        const reply = isModern(m) ? await answer(m, null, codec) : null;
        if (reply) await inner.send(reply.body);
        else this.onmessage?.(m, extra);
      }).catch((e) => log('tasks:', e?.message ?? e));
    };
  }
  start() { return this.inner.start(); }
  close() { return this.inner.close(); }
  send(m, o) { return this.inner.send(m, o); }
  get sessionId() { return this.inner.sessionId; }
}
