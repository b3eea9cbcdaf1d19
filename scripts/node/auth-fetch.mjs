// Preloaded with `node --import` so a client without a header option (the conformance suite)
// sends the bearer token PILOT_TOKEN on every fetch to a URL starting with PILOT_URL.
const url = process.env.PILOT_URL ?? "";
const token = process.env.PILOT_TOKEN ?? "";
const original = globalThis.fetch;

globalThis.fetch = (input, init = {}) => {
  const target = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  if (url && token && target.startsWith(url)) {
    const base = init.headers ?? (input instanceof Request ? input.headers : undefined);
    const headers = new Headers(base);
    headers.set("authorization", `Bearer ${token}`);
    init = { ...init, headers };
  }
  return original(input, init);
};
