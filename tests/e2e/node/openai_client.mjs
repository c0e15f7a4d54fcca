// Drives the server with the OpenAI Node SDK (npm package openai).
//   node openai_client.mjs BASE_URL PLAN_JSON
// PLAN_JSON: a list of {"kind": "completion"|"chat"|"models", "stream": bool,
// "params": {...}}; prints one JSON line: each call's texts (per choice),
// finish reasons, usage, chunk count, or the SDK's error (status, message).
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const dir = process.env.MCP_NODE_CLIENTS_DIR;
const OpenAI = require(path.join(dir, "node_modules", "openai")).default;

const [base, planText] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0, timeout: 60000 });

async function one(call) {
  const p = call.params || {};
  if (call.kind === "models") {
    const list = await client.models.list();
    return { ids: list.data.map((m) => m.id) };
  }
  const api = call.kind === "chat" ? client.chat.completions : client.completions;
  if (!call.stream) {
    const r = await api.create(p);
    return {
      object: r.object,
      texts: r.choices.map((c) => (call.kind === "chat" ? c.message.content : c.text)),
      finish: r.choices.map((c) => c.finish_reason),
      logprobs: r.choices.map((c) => c.logprobs),
      usage: r.usage,
    };
  }
  const stream = await api.create({ ...p, stream: true });
  const texts = [], finish = [];
  let chunks = 0, usage = null, roles = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      texts[c.index] = (texts[c.index] || "") + (call.kind === "chat" ? c.delta.content || "" : c.text);
      if (call.kind === "chat" && c.delta.role) roles++;
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  return { object: "stream", texts, finish, usage, chunks, roles };
}

const out = [];
for (const call of JSON.parse(planText)) {
  try {
    out.push(await one(call));
  } catch (e) {
    out.push({ error: { status: e.status ?? null, message: String(e.message), param: e.param ?? null, type: e.type ?? null } });
  }
}
console.log(JSON.stringify(out));
