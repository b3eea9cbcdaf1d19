// Preloaded with `node --import` so a client without a header option (the conformance suite)
// sends the bearer token PILOT_TOKEN on every request to a URL starting with PILOT_URL: its
// fetch calls and its raw undici requests (the DNS-rebinding probes) go through undici's global
// dispatcher, which this wraps; its raw node:http requests (the header-validation probes) through
// http.request, which this wraps too.
import http from "node:http";
import { syncBuiltinESMExports } from "node:module";
import { getGlobalDispatcher, setGlobalDispatcher } from "undici";

const url = process.env.PILOT_URL ?? "";
const token = process.env.PILOT_TOKEN ?? "";

// undici's request headers (a plain object, a flat [name, value, …] array, or pairs) as a flat
// array, repeated headers kept as they are, with the bearer token in place of any Authorization.
function withToken(headers) {
  const pairs = [];
  if (Array.isArray(headers)) {
    if (headers.length > 0 && Array.isArray(headers[0])) pairs.push(...headers);
    else for (let i = 0; i < headers.length; i += 2) pairs.push([headers[i], headers[i + 1]]);
  } else if (headers && typeof headers[Symbol.iterator] === "function") {
    pairs.push(...headers);
  } else if (headers) {
    pairs.push(...Object.entries(headers));
  }
  const flat = [];
  for (const [name, value] of pairs) {
    if (String(name).toLowerCase() === "authorization") continue;
    for (const one of Array.isArray(value) ? value : [value]) flat.push(String(name), String(one));
  }
  return [...flat, "authorization", `Bearer ${token}`];
}

if (url && token) {
  const pilot = new URL(url);
  setGlobalDispatcher(
    getGlobalDispatcher().compose((dispatch) => (options, handler) => {
      const origin = options.origin ? new URL(String(options.origin)).origin : "";
      if (origin === pilot.origin && String(options.path ?? "").startsWith(pilot.pathname)) {
        options = { ...options, headers: withToken(options.headers) };
      }
      return dispatch(options, handler);
    }),
  );
}

if (url && token) {
  const pilot = new URL(url);
  const original = http.request;
  http.request = (options, ...rest) => {
    const plain = options && typeof options === "object" && !(options instanceof URL);
    const host = plain ? `${options.hostname ?? options.host}:${options.port ?? 80}` : "";
    if (plain && host === pilot.host && String(options.path ?? "").startsWith(pilot.pathname)) {
      const headers = Object.fromEntries(
        Object.entries(options.headers ?? {}).filter(([name]) => name.toLowerCase() !== "authorization"),
      );
      options = { ...options, headers: { ...headers, authorization: `Bearer ${token}` } };
    }
    return original(options, ...rest);
  };
  syncBuiltinESMExports(); // `import { request } from "node:http"` sees the wrapper too
}
