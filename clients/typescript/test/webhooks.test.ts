// The Standard Webhooks verifier (WebCrypto): what the ledger signs verifies;
// a forged, stale or tampered delivery does not.
import assert from "node:assert/strict";
import { test } from "node:test";

import { WebhookVerificationError, WebhookVerifier, sign } from "../src/index.js";

const SECRET = `whsec_${Buffer.from("k".repeat(32)).toString("base64")}`;
const BODY = JSON.stringify({ type: "attempt.succeeded", attempt_id: "att_1" });
const NOW = 1_900_000_000;
const at = (now: number, toleranceSeconds = 300) => ({ now: () => now, toleranceSeconds });

async function headers(secret = SECRET, id = "msg_1", stamp = NOW, body = BODY) {
  return { "webhook-id": id, "webhook-timestamp": String(stamp), "webhook-signature": await sign(secret, id, stamp, body) };
}

test("the Standard Webhooks reference vector verifies", async () => {
  const verifier = new WebhookVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", at(1614265330));
  const event = await verifier.verify(
    new Headers({
      "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
      "webhook-timestamp": "1614265330",
      "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }),
    '{"test": 2432232314}',
  );
  assert.deepEqual(event, { test: 2432232314 });
});

test("a signed delivery verifies from a plain object, bytes or any header case; plain secrets too", async () => {
  const signed = await headers();
  assert.equal((await new WebhookVerifier(SECRET, at(NOW)).verify(signed, new TextEncoder().encode(BODY))).attempt_id, "att_1");
  const upper = Object.fromEntries(Object.entries(signed).map(([k, v]) => [k.toUpperCase(), v]));
  assert.ok(await new WebhookVerifier(SECRET, at(NOW)).verify(upper, BODY));
  assert.ok(await new WebhookVerifier("a plain passphrase", at(NOW)).verify(await headers("a plain passphrase"), BODY));
});

test("any of several signatures may match during a rotation; other versions are skipped", async () => {
  const old = (await headers(`whsec_${Buffer.from("o".repeat(32)).toString("base64")}`))["webhook-signature"];
  const current = (await headers())["webhook-signature"];
  const verifier = new WebhookVerifier(SECRET, at(NOW));
  for (const offered of [`${old} ${current}`, `v1a,xyz ${current}`]) {
    assert.ok(await verifier.verify({ ...(await headers()), "webhook-signature": offered }, BODY));
  }
  await assert.rejects(verifier.verify({ ...(await headers()), "webhook-signature": old }, BODY), /no signature matches/);
});

test("a tampered, forged, stale or incomplete delivery is refused, saying why", async () => {
  const verifier = new WebhookVerifier(SECRET, at(NOW));
  const good = await headers();
  const cases: [Record<string, string>, string, RegExp][] = [
    [good, BODY + " ", /no signature matches/],
    [{ ...good, "webhook-id": "msg_2" }, BODY, /no signature matches/],
    [{ ...good, "webhook-signature": "v1,not base64!" }, BODY, /no signature matches/],
    [{ ...good, "webhook-timestamp": "soon" }, BODY, /not Unix seconds/],
    [{ "webhook-id": "msg_1", "webhook-timestamp": String(NOW) }, BODY, /missing/],
  ];
  for (const [offered, body, why] of cases) {
    await assert.rejects(verifier.verify(offered, body), (e: unknown) => e instanceof WebhookVerificationError && why.test(e.message));
  }
  for (const now of [NOW + 301, NOW - 301]) {
    await assert.rejects(new WebhookVerifier(SECRET, at(now)).verify(good, BODY), /outside the tolerance/);
  }
  assert.ok(await new WebhookVerifier(SECRET, at(NOW + 300)).verify(good, BODY));
  await assert.rejects(new WebhookVerifier(SECRET, at(NOW + 31, 30)).verify(good, BODY), WebhookVerificationError);
  assert.throws(() => new WebhookVerifier("whsec_***"), /base64/);
  assert.throws(() => new WebhookVerifier(""), /empty/);
});
