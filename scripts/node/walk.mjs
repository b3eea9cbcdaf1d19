// Walk the demo (vmware-pilot demo) with @modelcontextprotocol/client 2.x pinned to one protocol
// era, and print what it saw as JSON.
//
//   node walk.mjs ERA stdio COMMAND [ARGS...]
//   node walk.mjs ERA http URL            (bearer token in PILOT_TOKEN)
//
// ERA is "legacy" (the 2025-11-25 initialize handshake) or a revision such as 2026-07-28, spoken
// from the first request. The walk: create incident_response from its template, review it, run it
// to the gate, approve without acknowledging the handed-back steps (a refusal), approve, read the
// status, preview the rollback, and read an unknown workflow (a refusal). Tools are listed first:
// the SDK validates each result's structured content against the tool's outputSchema. Each call's
// isError and structured content are reported; a call the SDK threw on is reported as `threw`.
// The test suite asserts on the printed report; this script decides nothing.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [era, mode, target, ...rest] = process.argv.slice(2);
const transport =
  mode === "http"
    ? new StreamableHTTPClientTransport(new URL(target), {
        requestInit: { headers: { Authorization: `Bearer ${process.env.PILOT_TOKEN ?? ""}` } },
      })
    : new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: "inherit" });
const options = era === "legacy" ? undefined : { versionNegotiation: { mode: { pin: era } } };
const client = new Client({ name: "walk", version: "1.0.0" }, options);
const report = { steps: [], errors: [] };
client.onerror = (error) => report.errors.push(String(error?.message ?? error));

async function call(step, name, args) {
  try {
    const result = await client.callTool({ name, arguments: args });
    const entry = { step, isError: result.isError === true, structured: result.structuredContent ?? null };
    entry.sameText = JSON.stringify(JSON.parse(result.content?.[0]?.text ?? "null")) === JSON.stringify(entry.structured);
    report.steps.push(entry);
    return entry.structured ?? {};
  } catch (error) {
    report.steps.push({ step, threw: String(error?.message ?? error) });
    return {};
  }
}

try {
  await client.connect(transport);
  report.version = client.getNegotiatedProtocolVersion();
  report.era = client.getProtocolEra();
  report.tools = (await client.listTools()).tools.length;
  const approver = mode === "http" ? "" : "demo";
  const created = await call("create", "create_workflow_from_template", {
    workflow_type: "incident_response",
    params: { alert_entity: "web-01", alert_name: "High CPU" },
  });
  const id = created.workflow_id;
  await call("review", "review_workflow", { workflow_id: id });
  await call("run", "run_workflow", { workflow_id: id });
  await call("approve refused", "approve", { workflow_id: id, approver });
  await call("approve", "approve", { workflow_id: id, approver, acknowledge_not_executed: true });
  await call("status", "get_workflow_status", { workflow_id: id });
  await call("rollback preview", "rollback", { workflow_id: id });
  await call("unknown workflow", "get_workflow_status", { workflow_id: "wf-nope" });
} catch (error) {
  report.failure = String(error?.stack ?? error);
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(report));
