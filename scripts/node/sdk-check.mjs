// Drive vmware-pilot with the official TypeScript SDK client and print what it saw as JSON.
//
//   node sdk-check.mjs stdio COMMAND [ARGS...]
//   node sdk-check.mjs http URL            (bearer token in PILOT_TOKEN)
//
// It lists and reads resources, subscribes to a workflow and waits for its update, gets a prompt,
// completes arguments, reads run progress as log messages, and records every error the SDK
// reports on its own (client.onerror: e.g. a response or progress for an unknown request).
// With PILOT_CANCEL=1 it also approves a slow gate and cancels that request mid-run.
// The test suite asserts on the printed report; this script decides nothing.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [mode, target, ...rest] = process.argv.slice(2);
const transport =
  mode === "http"
    ? new StreamableHTTPClientTransport(new URL(target), {
        requestInit: { headers: { Authorization: `Bearer ${process.env.PILOT_TOKEN ?? ""}` } },
      })
    : new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: "inherit" });

const client = new Client({ name: "sdk-check", version: "1.0.0" });
const report = { errors: [], updates: [], logs: [] };
client.onerror = (error) => report.errors.push(String(error?.message ?? error));
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  report.updates.push(n.params.uri);
});
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  report.logs.push(n.params);
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function waitFor(check, what, ms = 30000) {
  for (let waited = 0; waited < ms; waited += 50) {
    if (check()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}
const structured = (result) => result.structuredContent;

try {
  await client.connect(transport);
  report.capabilities = client.getServerCapabilities();
  report.resources = (await client.listResources()).resources.map((r) => r.uri);
  report.resourceTemplates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  await client.setLoggingLevel("info");

  const created = structured(
    await client.callTool({
      name: "create_workflow_from_template",
      arguments: { workflow_type: "incident_response", params: { alert_entity: "web-01", alert_name: "High CPU" } },
    }),
  );
  const id = created.workflow_id;
  report.workflowId = id;
  const uri = `pilot://workflows/${id}`;
  report.read = JSON.parse((await client.readResource({ uri })).contents[0].text);
  report.templateRead = JSON.parse((await client.readResource({ uri: "pilot://templates/incident_response" })).contents[0].text);

  await client.subscribeResource({ uri });
  report.change = structured(
    await client.callTool({ name: "cancel_workflow", arguments: { workflow_id: id, reason: "sdk-check", confirm: true } }),
  );
  await waitFor(() => report.updates.includes(uri), "resources/updated");

  const prompt = await client.getPrompt({ name: "incident_response", arguments: { alert_entity: "web-01", alert_name: "High CPU" } });
  report.promptText = prompt.messages[0].content.text;
  report.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
  report.completeWorkflowId = (
    await client.complete({
      ref: { type: "ref/resource", uri: "pilot://workflows/{workflow_id}" },
      argument: { name: "workflow_id", value: id.slice(0, 6) },
    })
  ).completion.values;
  report.completeTemplateName = (
    await client.complete({ ref: { type: "ref/resource", uri: "pilot://templates/{name}" }, argument: { name: "name", value: "inc" } })
  ).completion.values;
  try {
    await client.readResource({ uri: "pilot://no/such/thing" });
    report.unknownResource = null;
  } catch (error) {
    report.unknownResource = { code: error.code, message: error.message };
  }

  if (process.env.PILOT_CANCEL === "1") {
    const steps = [
      { action: "require_approval", skill: "pilot", tool: "approve", params: { message: "Go?" } },
      ...[1, 2, 3].map((n) => ({ action: `slow_${n}`, skill: process.env.PILOT_CANCEL_SKILL ?? "debug", tool: "slow", params: { seconds: 0.7 } })),
    ];
    const slow = structured(await client.callTool({ name: "create_workflow", arguments: { name: "slow", description: "three slow steps", steps } }));
    report.slowRun = structured(await client.callTool({ name: "run_workflow", arguments: { workflow_id: slow.workflow_id } }));
    const controller = new AbortController();
    let progress = 0;
    const approval = client
      .callTool({ name: "approve", arguments: { workflow_id: slow.workflow_id, approver: "sdk-check" } }, undefined, {
        signal: controller.signal,
        onprogress: () => {
          progress += 1;
          if (progress === 1) controller.abort("changed my mind");
        },
      })
      .then(
        () => "answered",
        (error) => `rejected: ${error?.message ?? error}`,
      );
    report.cancelOutcome = await approval;
    const errorsAtCancel = report.errors.length;
    let state = "";
    for (let i = 0; i < 200 && state !== "completed" && state !== "failed"; i++) {
      await sleep(100);
      state = structured(await client.callTool({ name: "get_workflow_status", arguments: { workflow_id: slow.workflow_id } })).state;
    }
    await sleep(300);
    report.cancelledRunState = state;
    report.progressAfterCancel = progress - 1;
    report.errorsAfterCancel = report.errors.slice(errorsAtCancel);
  }
} catch (error) {
  report.failure = String(error?.stack ?? error);
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(report) + "\n");
