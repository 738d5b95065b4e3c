/**
 * When a request is sent again, and after how long (the same rules as the
 * Python client):
 *
 * - the connection failed before the request was sent: any request;
 * - the answer was lost after it went out (reset, timeout): reads, directory
 *   puts, and POSTs the server deduplicates, by their `Idempotency-Key`
 *   (propose, present, cancel: the retry carries the same key and gets the
 *   first answer) or by design (approve, decline, reconcile, resolve answer
 *   the stored truth when repeated);
 * - `503` and `429` (honouring `Retry-After`), and `409 idempotency_key_in_use`.
 *
 * Every retry waits: `Retry-After` when the server sent one (never less), else
 * exponential backoff with full jitter. `maxAttempts` and `maxElapsedMs`
 * bound the whole call; a `Retry-After` past either bound is not waited for.
 */

export interface RetryPolicy {
  maxAttempts: number;
  /** Milliseconds from the first try after which nothing is sent again. */
  maxElapsedMs: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** A longer `Retry-After` is not waited for: the call fails at once. */
  maxRetryAfterMs: number;
  /** In [0, 1): the jitter's source. */
  random: () => number;
  /** Milliseconds of a monotonic clock. */
  now: () => number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxAttempts: 5,
  maxElapsedMs: 30_000,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
  maxRetryAfterMs: 30_000,
  random: Math.random,
  now: () => performance.now(),
};

export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 503]);
export const RETRY_CODES: ReadonlySet<string> = new Set(["idempotency_key_in_use"]);

/** `Retry-After` in milliseconds (delta-seconds or an HTTP date); undefined if absent or unreadable. */
export function retryAfterMs(headers: Headers, nowEpochMs: number = Date.now()): number | undefined {
  const value = headers.get("retry-after")?.trim();
  if (value === undefined || value === "") return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const when = Date.parse(value);
  return Number.isNaN(when) ? undefined : Math.max(0, when - nowEpochMs);
}

/** The tries of one logical call: counts them and says how long to wait before the next. */
export class Budget {
  private readonly started: number;
  private tries = 0;

  constructor(private readonly policy: RetryPolicy) {
    this.started = policy.now();
  }

  /** Milliseconds to wait before trying again, or undefined: give up now. */
  nextDelay(retryAfter: number | undefined): number | undefined {
    this.tries += 1;
    if (this.tries >= this.policy.maxAttempts) return undefined;
    let delay: number;
    if (retryAfter !== undefined) {
      if (retryAfter > this.policy.maxRetryAfterMs) return undefined;
      delay = retryAfter;
    } else {
      const ceiling = Math.min(this.policy.maxDelayMs, this.policy.baseDelayMs * 2 ** (this.tries - 1));
      delay = this.policy.random() * ceiling;
    }
    if (this.policy.now() - this.started + delay > this.policy.maxElapsedMs) return undefined;
    return delay;
  }
}
