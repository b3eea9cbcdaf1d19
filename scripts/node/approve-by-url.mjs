// Approve under VMWARE_PILOT_APPROVALS=elicit with @modelcontextprotocol/client 2.x pinned to a
// 2026-07-28 era over HTTP, and print what it saw as JSON.
//
//   node approve-by-url.mjs ERA URL      (agent's bearer token in PILOT_TOKEN; the person's in
//                                         PILOT_PERSON_TOKEN)
//
// The agent creates a gated power-off and runs it to the gate, then calls approve. Pilot answers
// with an input_required result whose elicitation (URL mode) names the console's gate page; the
// SDK hands it to the elicitation/create handler below, which plays the person: it signs in to
// the console with their token, opens the page the link names, approves the plan the page shows,
// and answers "accept". The SDK then retries approve with the request state, and the call ends
// with the approval's result. Each link, the console's answers and the final result are reported.
// The test suite asserts on the printed report; this script decides nothing.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [era, target] = process.argv.slice(2);
const report = { links: [], console: [], errors: [] };
const transport = new StreamableHTTPClientTransport(new URL(target), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.PILOT_TOKEN ?? ""}` } },
});
const client = new Client(
  { name: "approve-by-url", version: "1.0.0" },
  { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: { pin: era } } },
);
client.onerror = (error) => report.errors.push(String(error?.message ?? error));

// The person's browser: keeps the console's cookies, follows no redirect.
const cookies = new Map();
async function browse(url, form) {
  const headers = { Cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") };
  const init = form
    ? { method: "POST", body: new URLSearchParams(form), headers, redirect: "manual" }
    : { headers, redirect: "manual" };
  const answer = await fetch(url, init);
  for (const line of answer.headers.getSetCookie()) {
    const [pair] = line.split(";");
    const at = pair.indexOf("=");
    cookies.set(pair.slice(0, at), pair.slice(at + 1));
  }
  const text = await answer.text();
  report.console.push({ url: new URL(url).pathname, method: form ? "POST" : "GET", status: answer.status });
  return text;
}

function field(html, name) {
  const found = html.match(new RegExp(`name="${name}" value="([^"]+)"`));
  if (!found) throw new Error(`no ${name} in the page`);
  return found[1];
}

client.setRequestHandler("elicitation/create", async (request) => {
  const { mode, url, message } = request.params;
  report.links.push({ mode, url, message });
  const base = new URL(url).origin;
  const login = await browse(`${base}/console/login`);
  await browse(`${base}/console/login`, {
    csrf: field(login, "csrf"),
    token: process.env.PILOT_PERSON_TOKEN ?? "",
    next: "",
  });
  const page = await browse(url);
  await browse(url.replace(/\/gate$/, "/approve"), {
    csrf: field(page, "csrf"),
    digest: field(page, "digest"),
    gate_step: field(page, "gate_step"),
  });
  return { action: "accept" };
});

async function call(name, args) {
  const result = await client.callTool({ name, arguments: args });
  return { isError: result.isError === true, structured: result.structuredContent ?? null };
}

try {
  await client.connect(transport);
  report.version = client.getNegotiatedProtocolVersion();
  await client.listTools(); // the SDK validates each result against the tool's outputSchema
  const gate = { action: "require_approval", skill: "pilot", tool: "approve", params: { message: "Power off web-01?" } };
  const off = {
    action: "off",
    skill: "aiops",
    tool: "power_off_vm",
    params: { vm_name: "web-01" },
    rollback_tool: "power_on_vm",
    rollback_params: { vm_name: "web-01" },
  };
  const created = await call("create_workflow", { name: "off", description: "power off web-01", steps: [gate, off] });
  const id = created.structured.workflow_id;
  report.workflow_id = id;
  report.run = await call("run_workflow", { workflow_id: id });
  report.approve = await call("approve", { workflow_id: id });
  report.status = await call("get_workflow_status", { workflow_id: id });
} catch (error) {
  report.failure = String(error?.stack ?? error);
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(report));
