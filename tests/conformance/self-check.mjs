#!/usr/bin/env node
// Smoke check of modern-fixture-server.mjs over both transports and both eras,
// with the real SDK v2 client (`@modelcontextprotocol/client` 2.4.0). The
// conformance CLI can only drive HTTP servers; this is what covers --stdio.
//
//   node tests/conformance/self-check.mjs            # http + stdio, modern + legacy
//   node tests/conformance/self-check.mjs stdio      # only one transport
//
// Per transport x era it connects, lists tools, calls test_simple_text, runs a
// server->client input round (2026-07-28: input_required auto-fulfilled by the
// client; legacy: real elicitation/create + sampling/createMessage requests
// produced by the SDK's legacy shim), reads a resource, gets a prompt, and (modern)
// opens subscriptions/listen and waits for tools/list_changed after
// test_trigger_tool_change. Prints one line per check; exit 1 on any failure.

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const here = dirname(fileURLToPath(import.meta.url));
const FIXTURE = join(here, 'modern-fixture-server.mjs');
const only = process.argv[2];
let failures = 0;
const ok = (name, cond, detail = '') => {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${name}${detail ? ` -- ${detail}` : ''}`);
  if (!cond) failures++;
};

function newClient(era) {
  const client = new Client(
    { name: 'fixture-self-check', version: '1.0.0' },
    {
      capabilities: { sampling: {}, elicitation: {}, roots: {} },
      versionNegotiation: { mode: era === 'modern' ? { pin: '2026-07-28' } : 'legacy' },
    },
  );
  const seen = { elicitation: 0, sampling: 0 };
  client.setRequestHandler('elicitation/create', async (req) => {
    seen.elicitation++;
    const props = Object.keys(req.params?.requestedSchema?.properties ?? {});
    return { action: 'accept', content: Object.fromEntries(props.map((p) => [p, p === 'ok' ? true : 'Alice'])) };
  });
  client.setRequestHandler('sampling/createMessage', async () => {
    seen.sampling++;
    return { role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'm', stopReason: 'endTurn' };
  });
  client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: 'file:///tmp', name: 'tmp' }] }));
  return { client, seen };
}

async function exercise(label, era, makeTransport) {
  const { client, seen } = newClient(era);
  const t = `${label}/${era}`;
  try {
    await client.connect(makeTransport(), { timeout: 10000 });
    const pv = client.getNegotiatedProtocolVersion();
    ok(`${t}: connect`, era === 'modern' ? pv === '2026-07-28' : pv < '2026-07-28', `protocol ${pv}`);
    const { tools } = await client.listTools();
    ok(`${t}: tools/list`, tools.some((x) => x.name === 'test_simple_text'), `${tools.length} tools`);
    const r1 = await client.callTool({ name: 'test_simple_text', arguments: {} });
    ok(`${t}: tools/call test_simple_text`, r1.content?.[0]?.text?.includes('simple text'));
    if (era === 'modern') {
      const r2 = await client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} });
      ok(`${t}: input_required round trip`, r2.content?.[0]?.text === 'Hello, Alice!' && seen.elicitation === 1, r2.content?.[0]?.text);
    } else {
      const r2 = await client.callTool({ name: 'test_elicitation', arguments: { message: 'hi' } });
      ok(`${t}: elicitation/create (legacy shim)`, seen.elicitation === 1 && /action=accept/.test(r2.content?.[0]?.text ?? ''), r2.content?.[0]?.text);
      const r3 = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'capital?' } });
      ok(`${t}: sampling/createMessage (legacy shim)`, seen.sampling === 1 && /Paris/.test(r3.content?.[0]?.text ?? ''), r3.content?.[0]?.text);
    }
    const rr = await client.readResource({ uri: 'test://static-text' });
    ok(`${t}: resources/read`, rr.contents?.[0]?.text?.includes('static text'));
    const gp = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'a', arg2: 'b' } });
    ok(`${t}: prompts/get`, gp.messages?.[0]?.content?.text?.includes("arg1='a'"));
    if (era === 'modern') {
      const changed = new Promise((resolve) => {
        client.setNotificationHandler('notifications/tools/list_changed', () => resolve(true));
        setTimeout(() => resolve(false), 3000);
      });
      const sub = await client.listen({ toolsListChanged: true });
      await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
      ok(`${t}: subscriptions/listen -> tools/list_changed`, await changed);
      await sub.close();
    }
  } catch (err) {
    ok(`${t}: no exception`, false, err?.message ?? String(err));
  } finally {
    await client.close().catch(() => {});
  }
}

async function withHttpFixture(fn) {
  const child = spawn(process.execPath, [FIXTURE, '--http', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const url = await new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`fixture did not start: ${buf}`)), 10000);
    child.stderr.on('data', (d) => {
      buf += d;
      const m = buf.match(/listening on (http:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.on('exit', (code) => reject(new Error(`fixture exited ${code}: ${buf}`)));
  });
  try {
    await fn(url);
  } finally {
    child.kill('SIGTERM');
  }
}

if (!only || only === 'http') {
  await withHttpFixture(async (url) => {
    for (const era of ['modern', 'legacy']) {
      await exercise('http', era, () => new StreamableHTTPClientTransport(new URL(url)));
    }
  });
}
if (!only || only === 'stdio') {
  for (const era of ['modern', 'legacy']) {
    await exercise('stdio', era, () => new StdioClientTransport({
      command: process.execPath, args: [FIXTURE, '--stdio'], stderr: 'ignore',
    }));
  }
}
console.log(failures ? `${failures} check(s) failed` : 'all checks passed');
process.exit(failures ? 1 : 0);
