// Send one refusal per tool through the official TypeScript SDK client and print what it saw.
//
//   node refusals.mjs v1|v2 stdio COMMAND [ARGS...]
//   node refusals.mjs v1|v2 http URL             (bearer token in PILOT_TOKEN)
//
// v1 is @modelcontextprotocol/sdk 1.x, v2 is @modelcontextprotocol/client 2.x. The calls come from
// PILOT_REFUSALS ({tool: arguments}). Tools are listed first, as a client does: that is where the
// SDK learns each tool's outputSchema, which it then validates every result against (a refusal
// included). PILOT_ERA (v2 only) pins the protocol revision: unset is the 2025 handshake, a
// revision such as 2026-07-28 is spoken from the first request (no initialize). Prints
// {tools: {name: {isError, text} | {threw}}, errors, version, era}; it decides nothing.
const [sdk, mode, target, ...rest] = process.argv.slice(2);
const v2 = sdk === "v2";
const { Client } = await import(v2 ? "@modelcontextprotocol/client" : "@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = await import(
  v2 ? "@modelcontextprotocol/client/stdio" : "@modelcontextprotocol/sdk/client/stdio.js"
);
const { StreamableHTTPClientTransport } = await import(
  v2 ? "@modelcontextprotocol/client" : "@modelcontextprotocol/sdk/client/streamableHttp.js"
);

const transport =
  mode === "http"
    ? new StreamableHTTPClientTransport(new URL(target), {
        requestInit: { headers: { Authorization: `Bearer ${process.env.PILOT_TOKEN ?? ""}` } },
      })
    : new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: "inherit" });
const era = process.env.PILOT_ERA;
const options = v2 && era ? { versionNegotiation: { mode: { pin: era } } } : undefined;
const client = new Client({ name: `refusals-${sdk}`, version: "1.0.0" }, options);
const report = { sdk, tools: {}, errors: [], listed: [] };
client.onerror = (error) => report.errors.push(String(error?.message ?? error));

try {
  await client.connect(transport);
  if (v2) {
    report.version = client.getNegotiatedProtocolVersion();
    report.era = client.getProtocolEra();
  }
  report.listed = (await client.listTools()).tools.filter((t) => t.outputSchema).map((t) => t.name);
  for (const [name, args] of Object.entries(JSON.parse(process.env.PILOT_REFUSALS))) {
    try {
      const result = await client.callTool({ name, arguments: args });
      report.tools[name] = { isError: result.isError === true, text: result.content?.[0]?.text };
    } catch (error) {
      report.tools[name] = { threw: String(error?.message ?? error) };
    }
  }
} catch (error) {
  report.failure = String(error?.stack ?? error);
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(report));
