// The OIDC token issuer of the OAUTHBEARER tests (started by tests/oidc_issuer.py):
// oauth2-mock-server on 127.0.0.1 (a free port), signing RS256 client-credentials tokens
// with a key it publishes at /jwks. The registered clients come as JSON in OIDC_CLIENTS
// ({"client id": {"secret": "...", "scopes": ["..."]}}): a request with another id, a wrong
// secret or a scope not granted gets 401/400 and an OAuth error, as a real provider does;
// a granted one gets a token whose sub is the client id. OIDC_TOKEN_TTL sets the lifetime.
// Prints one JSON line {"issuer": url} when ready; stops when its stdin closes.
import { OAuth2Server } from "oauth2-mock-server";

const clients = JSON.parse(process.env.OIDC_CLIENTS || "{}");
const ttl = Number(process.env.OIDC_TOKEN_TTL || "3600");
const server = new OAuth2Server();
await server.issuer.keys.generate("RS256");

function basic(req) {
  const header = req.headers.authorization || "";
  if (!header.startsWith("Basic ")) return null;
  const text = Buffer.from(header.slice(6), "base64").toString("utf8");
  const at = text.indexOf(":");
  return at < 0 ? null : [decodeURIComponent(text.slice(0, at)), decodeURIComponent(text.slice(at + 1))];
}

server.service.on("beforeTokenSigning", (token, req) => {
  const credentials = basic(req);
  if (credentials) token.payload.sub = credentials[0];
  token.payload.exp = token.payload.iat + ttl;
});
server.service.on("beforeResponse", (response, req) => {
  const credentials = basic(req);
  const client = credentials && clients[credentials[0]];
  if (!client || client.secret !== credentials[1]) {
    response.statusCode = 401;
    response.body = { error: "invalid_client", error_description: "unknown client or bad secret" };
    return;
  }
  const asked = (req.body.scope || "").split(" ").filter(Boolean);
  if (asked.some((s) => !(client.scopes || []).includes(s))) {
    response.statusCode = 400;
    response.body = { error: "invalid_scope", error_description: "scope not granted" };
    return;
  }
  response.body.expires_in = ttl;
});

await server.start(0, "127.0.0.1");
process.stdout.write(JSON.stringify({ issuer: server.issuer.url }) + "\n");
process.stdin.resume();
process.stdin.on("end", async () => { await server.stop(); process.exit(0); });
