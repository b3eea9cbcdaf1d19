// The OpenID Provider of the OAuth tests: oidc-provider on loopback, configured from two files.
//
//   node provider.mjs PORT JWKS_FILE CLIENTS_FILE
//
// JWKS_FILE holds the provider's private signing keys ({"keys": [...]}, the first signs);
// CLIENTS_FILE a list of {"id", "secret", "name", "groups"}: each is a person, twice over: a
// client allowed the client_credentials grant (a machine acting as that person), and a user
// account with that id who signs in through the development login form (any password) to the
// public client "mcp-desktop" (authorization code with PKCE, redirect URI REDIRECT below).
// With CONSOLE_REDIRECT in the environment (the callback URL of the Pilot under test, whose
// port the test picked), there is also the confidential client "pilot-console" with secret
// "console-secret" (authorization code, PKCE), which asks for openid profile groups: its ID token
// holds only the subject, and the userinfo endpoint gives name and groups.
// Access tokens carry the person's name and groups. Any resource indicator gets a JWT access
// token with that resource as audience. Prints "ready ISSUER" on stdout once it listens.
import { readFileSync } from 'node:fs';

import Provider from 'oidc-provider';

const [port, jwksFile, clientsFile] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const jwks = JSON.parse(readFileSync(jwksFile, 'utf8'));
const people = JSON.parse(readFileSync(clientsFile, 'utf8'));
const byId = new Map(people.map((p) => [p.id, p]));
const REDIRECT = 'http://127.0.0.1:9/callback';
const CONSOLE_REDIRECT = process.env.CONSOLE_REDIRECT;
const consoleClients = CONSOLE_REDIRECT
  ? [{
      client_id: 'pilot-console',
      client_secret: 'console-secret',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: [CONSOLE_REDIRECT],
      scope: 'openid profile groups',
    }]
  : [];

const provider = new Provider(issuer, {
  jwks,
  clients: [
    ...people.map((p) => ({
      client_id: p.id,
      client_secret: p.secret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      scope: 'mcp',
    })),
    {
      client_id: 'mcp-desktop',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: [REDIRECT],
      scope: 'mcp',
    },
    ...consoleClients,
  ],
  findAccount: (_ctx, id) => {
    const person = byId.get(id);
    return person && {
      accountId: id,
      claims: () => ({ sub: id, name: person.name, groups: person.groups }),
    };
  },
  scopes: ['mcp'],
  claims: { openid: ['sub'], profile: ['name'], groups: ['groups'] },
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => ({
        scope: 'mcp',
        audience: resource,
        accessTokenFormat: 'jwt',
        accessTokenTTL: 600,
      }),
    },
  },
  extraTokenClaims: (_ctx, token) => {
    const person = byId.get(token.accountId ?? token.clientId);
    return person ? { name: person.name, groups: person.groups } : undefined;
  },
});
// Quiet: the tests read stdout for the ready line only.
provider.on('server_error', (_ctx, err) => console.error('server_error', err));

const server = provider.listen(Number(port), '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
