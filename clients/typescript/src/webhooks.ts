/**
 * Verify the ledger's signed webhooks (Standard Webhooks) in a receiver, with
 * WebCrypto (`crypto.subtle`), so it runs in Node 20+ and in browsers and
 * edge runtimes alike.
 *
 * A delivery carries `webhook-id`, `webhook-timestamp` (Unix seconds) and
 * `webhook-signature`: one or more space-separated `v1,<base64 HMAC-SHA256 of
 * "id.timestamp.body">`. Verify the raw body exactly as received, before
 * parsing it. A `whsec_` secret is the base64 of the key; any other secret is
 * its UTF-8 bytes (as the ledger signs). The timestamp must lie within the
 * tolerance of now; drop a repeated `webhook-id` yourself (the ledger
 * delivers at least once).
 */

import { WebhookVerificationError } from "./errors.js";

export const SECRET_PREFIX = "whsec_";
export const DEFAULT_TOLERANCE_SECONDS = 300;

const encoder = new TextEncoder();

type Bytes = Uint8Array<ArrayBuffer>;

function decodeBase64(text: string): Bytes | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return undefined;
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** The HMAC key of a subscription secret. */
export function signingKey(secret: string): Bytes {
  if (secret.startsWith(SECRET_PREFIX)) {
    const key = decodeBase64(secret.slice(SECRET_PREFIX.length));
    if (key === undefined || key.length === 0) {
      throw new TypeError("webhook secret: not valid base64 after whsec_");
    }
    return key;
  }
  if (secret === "") throw new TypeError("webhook secret: empty");
  return encoder.encode(secret);
}

export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") {
    return (headers as Headers).get(name) ?? undefined;
  }
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(" ") : value;
  }
  return undefined;
}

function bytesOf(body: string | Uint8Array | ArrayBuffer): Bytes {
  if (typeof body === "string") return encoder.encode(body);
  return new Uint8Array(body); // a copy: the body cannot change under the check
}

export interface VerifierOptions {
  toleranceSeconds?: number;
  /** Unix seconds now (for tests). */
  now?: () => number;
}

/** Checks deliveries signed with one secret (make one per subscription). */
export class WebhookVerifier {
  private readonly key: Promise<CryptoKey>;
  private readonly toleranceSeconds: number;
  private readonly now: () => number;

  constructor(secret: string, options: VerifierOptions = {}) {
    const raw = signingKey(secret);
    this.key = crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, [
      "sign",
      "verify",
    ]);
    this.toleranceSeconds = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
    this.now = options.now ?? (() => Date.now() / 1000);
  }

  /** The delivery's JSON body when its signature and timestamp verify; a
   * `WebhookVerificationError` (saying which check failed) otherwise. */
  async verify(headers: HeaderSource, body: string | Uint8Array | ArrayBuffer): Promise<Record<string, unknown>> {
    const id = header(headers, "webhook-id");
    const stamp = header(headers, "webhook-timestamp");
    const offered = header(headers, "webhook-signature");
    if (!id || !stamp || !offered) {
      throw new WebhookVerificationError("missing webhook-id, webhook-timestamp or signature");
    }
    if (!/^\d+$/.test(stamp)) throw new WebhookVerificationError("webhook-timestamp is not Unix seconds");
    if (Math.abs(this.now() - Number(stamp)) > this.toleranceSeconds) {
      throw new WebhookVerificationError("webhook-timestamp is outside the tolerance window");
    }
    const raw = bytesOf(body);
    const prefix = encoder.encode(`${id}.${stamp}.`);
    const signed = new Uint8Array(prefix.length + raw.length);
    signed.set(prefix);
    signed.set(raw, prefix.length);
    const key = await this.key;
    let matched = false;
    for (const signature of v1Signatures(offered)) {
      // subtle.verify compares in constant time
      if (await crypto.subtle.verify("HMAC", key, signature, signed)) matched = true;
    }
    if (!matched) throw new WebhookVerificationError("no signature matches");
    let event: unknown;
    try {
      event = JSON.parse(new TextDecoder().decode(raw));
    } catch {
      throw new WebhookVerificationError("the signed body is not JSON");
    }
    if (event === null || typeof event !== "object" || Array.isArray(event)) {
      throw new WebhookVerificationError("the signed body is not a JSON object");
    }
    return event as Record<string, unknown>;
  }
}

/** The `v1,<base64>` signature of one delivery (for tests of a receiver). */
export async function sign(secret: string, id: string, timestamp: number, body: string | Uint8Array): Promise<string> {
  const key = await crypto.subtle.importKey("raw", signingKey(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const raw = bytesOf(body);
  const prefix = encoder.encode(`${id}.${timestamp}.`);
  const signed = new Uint8Array(prefix.length + raw.length);
  signed.set(prefix);
  signed.set(raw, prefix.length);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, signed));
  return `v1,${btoa(String.fromCharCode(...mac))}`;
}

function v1Signatures(headerValue: string): Bytes[] {
  const found: Bytes[] = [];
  for (const entry of headerValue.split(/\s+/)) {
    const comma = entry.indexOf(",");
    if (comma < 0 || entry.slice(0, comma) !== "v1") continue;
    const bytes = decodeBase64(entry.slice(comma + 1));
    if (bytes !== undefined && bytes.length > 0) found.push(bytes);
  }
  return found;
}
