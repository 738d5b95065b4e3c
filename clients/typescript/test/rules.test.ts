// The client's rules without a server: keys, what is retried and how long it
// waits, the long poll's loop and deadline, answers and errors (a fake fetch).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  ERRORS_BY_CODE,
  IdempotencyKeyInUse,
  InvalidSpec,
  LedgerClient,
  LedgerClientError,
  LedgerConnectionError,
  NoAvailableBuild,
  StoreUnavailable,
  TooManyRequests,
  UnexpectedResponse,
  errorFromAnswer,
  makeSpec,
  newIdempotencyKey,
  pickBuild,
  retryAfterMs,
  type ExecutorOut,
  type ProposalSpec,
} from "../src/index.js";

type Step = Response | Error;

function scripted(...steps: Step[]) {
  const seen: { url: string; init: RequestInit }[] = [];
  const fetchImpl = (async (url: string | URL | Request, init?: RequestInit) => {
    seen.push({ url: String(url), init: init ?? {} });
    const step = steps.shift();
    if (step === undefined) throw new Error("no more scripted answers");
    if (step instanceof Error) throw step;
    return step;
  }) as typeof fetch;
  return { seen, fetchImpl };
}

function clock() {
  const state = { now: 0, slept: [] as number[] };
  return {
    state,
    retry: { now: () => state.now, random: () => 0.5 },
    sleep: async (ms: number) => {
      state.slept.push(ms);
      state.now += ms;
    },
  };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
const refused = (status: number, code: string, headers: Record<string, string> = {}) =>
  json(status, { error: code, detail: "no" }, headers);
const PROPOSAL = { proposal_id: `prop_${"0".repeat(32)}`, version: 1, payload_hash: "h", view_hash: "v", preview: "p", status: "presented" };
const SPEC = { capability: "tasks.create" } as unknown as ProposalSpec;
const reset = () => Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }) });
const refusedConnection = () => Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error("connect"), { code: "ECONNREFUSED" }) });

function client(fetchImpl: typeof fetch, c = clock(), retry: Record<string, number> = {}) {
  return new LedgerClient("http://ledger.test", { token: "t0ken", fetch: fetchImpl, sleep: c.sleep, retry: { ...c.retry, ...retry } });
}

const header = (init: RequestInit, name: string) => (init.headers as Record<string, string>)[name];

test("every POST carries a fresh 256-bit key, reused by its retries", async () => {
  const { seen, fetchImpl } = scripted(reset(), json(201, PROPOSAL), json(201, PROPOSAL));
  const c = client(fetchImpl);
  await c.propose("alice", SPEC);
  await c.propose("alice", SPEC);
  const keys = seen.map((s) => header(s.init, "Idempotency-Key")!);
  assert.equal(keys[0], keys[1]);
  assert.notEqual(keys[1], keys[2]);
  for (const key of keys) assert.equal(Buffer.from(key, "base64url").length, 32);
  assert.equal(header(seen[0]!.init, "Authorization"), "Bearer t0ken");
  assert.deepEqual(JSON.parse(String(seen[0]!.init.body)), { actor_id: "alice", spec: SPEC });
  assert.notEqual(newIdempotencyKey(), newIdempotencyKey());
});

test("a caller may bring its own key; reads carry none and are retried after a reset", async () => {
  const { seen, fetchImpl } = scripted(json(201, PROPOSAL), reset(), json(200, { items: [] }));
  const c = client(fetchImpl);
  await c.propose("alice", SPEC, { idempotencyKey: "order-42" });
  assert.deepEqual((await c.executors()).items, []);
  assert.equal(header(seen[0]!.init, "Idempotency-Key"), "order-42");
  assert.equal(header(seen[1]!.init, "Idempotency-Key"), undefined);
  assert.equal(seen.length, 3);
});

test("a request the server does not deduplicate is resent only if it was never sent", async () => {
  const { seen, fetchImpl } = scripted(refusedConnection(), reset());
  const c = client(fetchImpl);
  await assert.rejects(
    c.call({ method: "POST", path: "/webhook-deliveries/whd_1/redeliver", body: {}, resendSafe: false }),
    (e: unknown) => e instanceof LedgerConnectionError && e.message === "fetch failed (UND_ERR_SOCKET)" && e.status === 0,
  );
  assert.equal(seen.length, 2);
});

test("Retry-After is honoured in seconds and as a date; otherwise jittered backoff", async () => {
  assert.equal(retryAfterMs(new Headers({ "retry-after": "3" })), 3000);
  assert.equal(retryAfterMs(new Headers({ "retry-after": "Tue, 01 Jan 2030 00:00:07 GMT" }), Date.UTC(2030, 0, 1)), 7000);
  assert.equal(retryAfterMs(new Headers({ "retry-after": "soon" })), undefined);
  const c1 = clock();
  await client(scripted(refused(503, "store_unavailable", { "retry-after": "3" }), json(201, PROPOSAL)).fetchImpl, c1).propose("a", SPEC);
  assert.deepEqual(c1.state.slept, [3000]);
  const c2 = clock();
  const steps = [1, 2, 3, 4].map(() => refused(503, "store_unavailable"));
  await client(scripted(...steps, json(201, PROPOSAL)).fetchImpl, c2, { baseDelayMs: 200, maxDelayMs: 1000 }).propose("a", SPEC);
  assert.deepEqual(c2.state.slept, [100, 200, 400, 500]);
});

test("attempts and total time are bounded; a too-long Retry-After is not waited for", async () => {
  const three = scripted(...[1, 2, 3].map(() => refused(503, "store_unavailable")));
  await assert.rejects(client(three.fetchImpl, clock(), { maxAttempts: 3 }).propose("a", SPEC), StoreUnavailable);
  assert.equal(three.seen.length, 3);
  const c = clock();
  const late = scripted(refused(429, "too_many_requests", { "retry-after": "20" }));
  await assert.rejects(client(late.fetchImpl, c, { maxElapsedMs: 15_000 }).propose("a", SPEC), TooManyRequests);
  assert.deepEqual(c.state.slept, []);
});

test("a key in use is retried with the same key", async () => {
  const { seen, fetchImpl } = scripted(refused(409, "idempotency_key_in_use"), json(201, PROPOSAL));
  await client(fetchImpl).propose("a", SPEC);
  assert.equal(header(seen[0]!.init, "Idempotency-Key"), header(seen[1]!.init, "Idempotency-Key"));
  const busy = scripted(...[1, 2, 3, 4, 5].map(() => refused(409, "idempotency_key_in_use")));
  await assert.rejects(client(busy.fetchImpl).propose("a", SPEC), IdempotencyKeyInUse);
});

const attempt = (status: string) => ({
  attempt_id: "att_1", proposal_id: "prop_1", proposal_version: 1, status, revision: 2,
  delivery_mode: "provider_idempotency", created_at: "t", updated_at: "t", lease_generation: 1,
});

test("wait long-polls until the attempt settles, or until the caller's deadline", async () => {
  const c = clock();
  const waits: string[] = [];
  const fetchImpl = (async (url: string | URL | Request) => {
    const seconds = new URL(String(url)).searchParams.get("wait")!;
    waits.push(seconds);
    c.state.now += Number(seconds) * 1000;
    return json(200, attempt(waits.length === 3 ? "succeeded" : "executing"));
  }) as typeof fetch;
  assert.equal((await client(fetchImpl, c).wait("att_1", { timeoutMs: 100_000 })).status, "succeeded");
  assert.deepEqual(waits, ["30", "30", "30"]);
  waits.length = 0;
  const stuck = (async (url: string | URL | Request) => {
    const seconds = new URL(String(url)).searchParams.get("wait")!;
    waits.push(seconds);
    c.state.now += Number(seconds) * 1000;
    return json(200, attempt("queued"));
  }) as typeof fetch;
  assert.equal((await client(stuck, c).wait("att_1", { timeoutMs: 45_000 })).status, "queued");
  assert.deepEqual(waits, ["30", "15"]);
});

test("a non-JSON answer is an unexpected response; ids are escaped into one segment", async () => {
  await assert.rejects(client(scripted(new Response("<html>", { status: 200 })).fetchImpl).executors(), UnexpectedResponse);
  const { seen, fetchImpl } = scripted(refused(404, "not_found"));
  await assert.rejects(client(fetchImpl).getProposal("../executors"));
  assert.equal(new URL(seen[0]!.url).pathname, "/api/conversational/proposals/..%2Fexecutors");
});

test("every code maps to its class; unknown codes and foreign bodies still throw a LedgerClientError", () => {
  for (const [code, cls] of ERRORS_BY_CODE) {
    const error = errorFromAnswer(409, { error: code, detail: "why" });
    assert.equal(error.constructor, cls);
    assert.equal(error.code, code);
    assert.equal(error.name, cls.name);
    assert.ok(error instanceof LedgerClientError && error instanceof Error);
  }
  const unknown = errorFromAnswer(418, { error: "added_later", detail: "x" });
  assert.equal(unknown.constructor, LedgerClientError);
  assert.equal(unknown.code, "added_later");
  assert.equal(errorFromAnswer(502, undefined).code, "internal_error");
  assert.equal(errorFromAnswer(429, undefined).code, "too_many_requests");
});

test("pickBuild takes the newest available build of the capability", () => {
  const build = (digest: string, available: boolean, capability = "tasks.create"): ExecutorOut => ({
    capability, executor_build: digest, delivery_mode: "provider_idempotency", available, state: "current",
    schema_digest: "sha256:schema",
  });
  const listing = [build("z", true, "other"), build("new", false), build("mid", true), build("old", true)];
  assert.equal(pickBuild(listing, "tasks.create").executor_build, "mid");
  assert.throws(() => pickBuild([build("new", false)], "tasks.create"), (e: unknown) => e instanceof NoAvailableBuild && /allows none/.test(e.message));
  assert.throws(() => pickBuild(listing, "notes.append"), /hosts no build/);
});

test("a spec names the build's schema digest unless the proposer gives its own", () => {
  const build: ExecutorOut = {
    capability: "tasks.create", executor_build: "sha256:b", delivery_mode: "provider_idempotency",
    available: true, state: "current", schema_digest: "sha256:s",
  };
  const fields = { permission: "tasks.write", effect: "create", destination: "t" };
  const digests = { plugin_build: "sha256:plugin", policy_digest: "sha256:policy" };
  const spec = makeSpec(build, { title: "x" }, { ...fields, digests });
  assert.deepEqual(
    [spec.executor_build, spec.schema_digest, spec.plugin_build, spec.policy_digest],
    ["sha256:b", "sha256:s", "sha256:plugin", "sha256:policy"],
  );
  const pinned = makeSpec(build, {}, { ...fields, digests: { ...digests, schema_digest: "sha256:old" } });
  assert.equal(pinned.schema_digest, "sha256:old");
});

test("a field refusal carries every failing field; other refusals carry none", () => {
  const error = errorFromAnswer(422, {
    error: "invalid_spec",
    detail: "2 fields",
    errors: [
      { pointer: "/spec/content/title", message: "is required", location: "body" },
      { pointer: "/limit", message: "at most 100", location: "query" },
      { pointer: 3, message: "not the documented shape" },
    ],
    error_count: 2,
  });
  assert.ok(error instanceof InvalidSpec);
  assert.deepEqual(error.errors, [
    { pointer: "/spec/content/title", message: "is required", location: "body" },
    { pointer: "/limit", message: "at most 100", location: "query" },
  ]);
  assert.equal(error.errorCount, 2);
  const plain = errorFromAnswer(404, { error: "not_found", detail: "no" });
  assert.deepEqual([plain.errors, plain.errorCount], [[], 0]);
});
