// The client against a real `ledger serve` (SQLite): the whole flow, typed
// errors, a lost answer retried into exactly one proposal, Retry-After honoured.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";

import {
  ApprovalUnavailable,
  ExecutorBuildUnavailable,
  Forbidden,
  IdempotencyKeyRefused,
  InvalidInput,
  LedgerClient,
  LedgerClientError,
  NotFound,
  PolicyDenied,
  PolicyDigestMismatch,
  StoreUnavailable,
  Unauthenticated,
  UnknownPermission,
  sha256Digest,
  settled,
  type Provenance,
  type SpecFields,
} from "../src/index.js";
import { FaultProxy, LedgerServer } from "./server.js";

const FAKE = "fake.provider_idempotency";
const CONTENT = { title: "Buy milk" };
let server: LedgerServer;
let admin: LedgerClient;
let proposerToken: string;
let fields: SpecFields;

async function enrol(): Promise<{ who: Provenance; channel: LedgerClient }> {
  const tag = randomBytes(4).toString("hex");
  const who: Provenance = {
    actor_id: `ts-${tag}`,
    identity_binding_id: `ib-${tag}`,
    channel_binding_id: `cb-${tag}`,
    conversation_key: `conv-${tag}`,
  };
  await admin.putActor(who.actor_id);
  await admin.putIdentityBinding(who.identity_binding_id, { actor_id: who.actor_id, channel: "chat", external_id: `${tag}@chat` });
  await admin.putChannelBinding(who.channel_binding_id, { conversation_key: who.conversation_key, channel: "chat" });
  await admin.putGrant(who.actor_id, "tasks.write");
  return { who, channel: new LedgerClient(server.url, { token: server.token("channel", who) }) };
}

before(async () => {
  server = await LedgerServer.start();
  admin = new LedgerClient(server.url, { token: server.token("admin") });
  proposerToken = server.token("proposer");
  for (const build of (await admin.executors()).items) {
    await admin.putExecutorBuild(build.capability, build.executor_build, { delivery_mode: build.delivery_mode });
  }
  fields = {
    permission: "tasks.write",
    effect: "create",
    destination: "tasks",
    digests: {
      plugin_build: await sha256Digest("the TypeScript tests' assistant, build 1"),
      policy_digest: await sha256Digest("tasks.write for enrolled actors, after their approval"),
    },
  };
});

after(() => server.stop());

test("the whole flow: executors, spec, propose, present, inbox, approve, wait", async () => {
  const assistant = new LedgerClient(server.url, { token: proposerToken });
  const { who, channel } = await enrol();
  const newest = (await assistant.executors()).items.find((item) => item.capability === FAKE)!;
  const spec = await assistant.buildSpec(FAKE, CONTENT, fields);
  assert.equal(spec.executor_build, newest.executor_build);
  assert.ok(newest.available);
  assert.equal(spec.schema_digest, newest.schema_digest, "the build's, from the listing");
  assert.equal(newest.content_schema?.type, "object", "every fake declares its content schema");
  const proposal = await assistant.propose(who, spec);
  assert.equal(proposal.status, "presented");
  const shown = await assistant.present(proposal, who);
  assert.deepEqual((await channel.inbox(who.actor_id)).items.map((i) => i.proposal_id), [proposal.proposal_id]);
  const approval = await channel.approve(shown.token);
  assert.equal(approval.status, "execution_pending");
  assert.equal((await channel.approve(shown.token)).attempt_id, approval.attempt_id);
  const result = await channel.wait(approval, { timeoutMs: 30_000 });
  assert.equal(result.status, "succeeded");
  assert.ok(settled(result) && result.result?.receipt);
  const second = await assistant.propose(who.actor_id, spec);
  const declined = await channel.decline((await assistant.present(second, who)).token);
  assert.equal(declined.status, "declined");
  const third = await assistant.propose(who.actor_id, spec);
  assert.equal((await assistant.cancel(third)).status, "canceled");
});

test("each refusal throws the class of its code, with status and detail", async () => {
  const assistant = new LedgerClient(server.url, { token: proposerToken });
  const { who, channel } = await enrol();
  const spec = await assistant.buildSpec(FAKE, CONTENT, fields);
  const gone = await sha256Digest("gone");
  const actorToken = server.token("actor");
  const cases: [() => Promise<unknown>, typeof LedgerClientError, number][] = [
    [() => new LedgerClient(server.url, { token: "not-a-jwt" }).executors(), Unauthenticated, 401],
    [() => new LedgerClient(server.url, { token: actorToken }).executors(), Forbidden, 403],
    [() => assistant.getProposal(`prop_${"0".repeat(32)}`), NotFound, 404],
    [() => channel.approve("not-a-token"), ApprovalUnavailable, 404],
    [() => assistant.propose(who.actor_id, { ...spec, permission: "gold.mint" }), UnknownPermission, 422],
    [() => assistant.propose(who.actor_id, { ...spec, executor_build: gone }), ExecutorBuildUnavailable, 422],
    [() => assistant.propose(who.actor_id, { ...spec, plugin_build: "sha256:nope" }), InvalidInput, 422],
  ];
  for (const [run, cls, status] of cases) {
    await assert.rejects(run, (error: unknown) => {
      assert.ok(error instanceof cls, `${String(error)} is not a ${cls.name}`);
      assert.equal(error.constructor, cls);
      assert.equal((error as LedgerClientError).status, status);
      assert.equal((error as LedgerClientError).code, cls.code);
      assert.ok((error as LedgerClientError).detail.length > 0);
      return true;
    });
  }
  const key = "ts-reused-key-" + randomBytes(8).toString("hex");
  await assistant.propose(who.actor_id, spec, { idempotencyKey: key });
  await assert.rejects(assistant.propose(who.actor_id, { ...spec, destination: "notes" }, { idempotencyKey: key }), IdempotencyKeyRefused);
});

test("a lost answer is retried with the same key and makes exactly one proposal", async () => {
  const { who, channel } = await enrol();
  const proxy = await FaultProxy.start(server.url);
  const slept: number[] = [];
  try {
    proxy.drop("POST", "/api/conversational/proposals");
    const assistant = new LedgerClient(proxy.url, {
      token: proposerToken,
      sleep: async (ms) => {
        slept.push(ms);
      },
    });
    const spec = await assistant.buildSpec(FAKE, CONTENT, fields);
    const proposal = await assistant.propose(who.actor_id, spec);
    const posts = proxy.seen.filter((s) => s.method === "POST");
    assert.deepEqual(posts.map((s) => s.action), ["drop", "forwarded"]);
    assert.ok(posts[0]!.key && posts[0]!.key === posts[1]!.key);
    assert.equal(Buffer.from(posts[0]!.key, "base64url").length, 32);
    const ids = posts.map((s) => (JSON.parse(s.answer!) as { proposal_id: string }).proposal_id);
    assert.deepEqual(ids, [proposal.proposal_id, proposal.proposal_id]);
    assert.equal(slept.length, 1);
    await server.caughtUp();
    const inbox = await channel.inbox(who.actor_id);
    assert.deepEqual(inbox.items.map((i) => i.proposal_id), [proposal.proposal_id]); // one proposal exists
  } finally {
    await proxy.close();
  }
});

test("503 and 429 with Retry-After are waited out, and the retries are bounded", async () => {
  const proxy = await FaultProxy.start(server.url);
  const slept: number[] = [];
  try {
    proxy.refuse("GET", "/api/conversational/executors", 503, { "retry-after": "2" });
    proxy.refuse("GET", "/api/conversational/executors", 429, { "retry-after": "1" });
    const client = new LedgerClient(proxy.url, {
      token: proposerToken,
      sleep: async (ms) => {
        slept.push(ms);
      },
    });
    assert.ok((await client.executors()).items.length > 0);
    assert.deepEqual(slept, [2000, 1000]);
    assert.deepEqual(proxy.seen.map((s) => s.action), ["refuse", "refuse", "forwarded"]);
    for (let i = 0; i < 3; i += 1) proxy.refuse("GET", "/api/conversational/executors", 503, { "retry-after": "1" });
    const bounded = new LedgerClient(proxy.url, { token: proposerToken, retry: { maxAttempts: 3 }, sleep: async () => {} });
    await assert.rejects(bounded.executors(), StoreUnavailable);
  } finally {
    await proxy.close();
  }
});

test("policies and standing grants: a set that approves and forbids, a grant used and revoked", async () => {
  const assistant = new LedgerClient(server.url, { token: proposerToken });
  const { who } = await enrol();
  const before = await admin.policies();
  const text = [
    `@id("ts-small") @auto_approve permit (principal == Actor::"${who.actor_id}", action, resource)`,
    "when { context.content has minutes && context.content.minutes <= 30 };",
    `@id("ts-no-deletions") forbid (principal == Actor::"${who.actor_id}", action, resource)`,
    'when { context.effect == "delete" };',
  ].join("\n");
  const applied = await admin.applyPolicies(text, { expectedVersion: before.version });
  try {
    assert.deepEqual(applied.policies.map((p) => [p.id, p.effect, p.auto_approve]), [
      ["ts-small", "permit", true],
      ["ts-no-deletions", "forbid", false],
    ]);
    const seen = await assistant.policies();
    assert.equal(seen.digest, applied.digest);
    assert.equal(seen.text ?? null, null); // a proposer sees the digest, not the text
    await assert.rejects(assistant.propose(who, await assistant.buildSpec(FAKE, CONTENT, fields)), PolicyDigestMismatch);
    const under = { ...fields, digests: { ...fields.digests, policy_digest: seen.digest! } };
    const task = (effect: string, minutes: number) => assistant.buildSpec(FAKE, { title: "Water", minutes }, { ...under, effect });
    const small = await assistant.propose(who, await task("create", 10));
    assert.equal(small.status, "claimed");
    assert.equal(small.approval?.kind, "policy");
    assert.equal(small.approval?.policy_id, "ts-small");
    assert.equal((await admin.wait(small.attempt_id!, { timeoutMs: 30_000 })).approval?.kind, "policy");
    await assert.rejects(assistant.propose(who, await task("delete", 1)), (e: unknown) => e instanceof PolicyDenied && /ts-no-deletions/.test(e.detail));
    const expires = new Date(Date.now() + 86_400_000).toISOString().replace(/\.\d+Z$/, "Z");
    const made = await admin.grant({ actor_id: who.actor_id, capability: FAKE, max_uses: 1, expires_at: expires, conditions: [{ field: "minutes", op: "lte", value: 120 }] });
    const granted = await assistant.propose(who, await task("create", 60));
    assert.deepEqual([granted.approval?.kind, granted.approval?.grant_id, granted.approval?.use], ["grant", made.grant_id, 1]);
    assert.equal((await assistant.propose(who, await task("create", 60))).status, "presented");
    assert.deepEqual((await admin.standingGrants(who.actor_id)).items.map((g) => [g.grant_id, g.state]), [[made.grant_id, "spent"]]);
    assert.equal((await admin.revokeGrant(made.grant_id)).state, "revoked");
    assert.equal((await admin.standingGrant(made.grant_id)).revoked, true);
  } finally {
    await admin.applyPolicies(""); // the server is shared: leave no policy behind
  }
});
