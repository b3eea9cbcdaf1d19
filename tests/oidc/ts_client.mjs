// An MCP client made with the TypeScript SDK, for the OAuth tests:
//
//   node ts_client.mjs MCP_URL CLIENT_ID CLIENT_SECRET ISSUER [SCOPE]
//
// It connects with the SDK's ClientCredentialsProvider, which finds the authorization server from
// the server's 401 and protected resource metadata and gets an access token there; then it lists
// the tools and calls list_workflows. Prints one JSON line: the server's name, the tool names and
// the call's result. (This SDK's client credentials flow requests only the scope given here, not
// the scopes the resource metadata announces.)
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, clientId, clientSecret, issuer, scope] = process.argv.slice(2);
const authProvider = new ClientCredentialsProvider({
  clientId, clientSecret, expectedIssuer: issuer, scope,
});
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
const client = new Client({ name: 'vmware-pilot-ts-test', version: '1.0.0' });

await client.connect(transport);
const { tools } = await client.listTools();
const result = await client.callTool({ name: 'list_workflows', arguments: { limit: 5 } });
console.log(JSON.stringify({
  server: client.getServerVersion()?.name,
  tools: tools.map((t) => t.name).sort(),
  result,
}));
await client.close();
