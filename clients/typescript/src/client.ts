/**
 * The client: one method per operation of the ledger's HTTP API, on `fetch`
 * (Node 20+, browsers, edge runtimes).
 */

import {
  LedgerClientError,
  LedgerConnectionError,
  UnexpectedResponse,
  errorFromAnswer,
} from "./errors.js";
import { Budget, DEFAULT_RETRY, RETRY_CODES, RETRY_STATUSES, type RetryPolicy, retryAfterMs } from "./retry.js";
import { type SpecFields, makeSpec, pickBuild } from "./spec.js";
import {
  type ActorOut,
  type ApprovalIn,
  type ApprovalOut,
  type AttemptListOut,
  type AttemptOut,
  type ChannelBindingOut,
  type DeclineOut,
  type DeliveryMode,
  type ExecutorBuildOut,
  type ExecutorListOut,
  type GrantOut,
  type IdentityBindingOut,
  type InboxOut,
  type PolicySetOut,
  type PresentationIn,
  type PresentationOut,
  type ProposalOut,
  type ProposalSpec,
  type ProposalViewOut,
  type StandingGrantIn,
  type StandingGrantListOut,
  type StandingGrantOut,
  type TargetOut,
  settled,
} from "./types.js";

export const VERSION = "0.1.0";
export const API_PREFIX = "/api/conversational";
/** The server's longest single long poll (`?wait=1..30`). */
export const MAX_WAIT_SECONDS = 30;

export type TokenSource = string | (() => string | Promise<string>);

export interface ClientOptions {
  /** A bearer JWT, or a function giving the current one. */
  token?: TokenSource;
  /** Per request (a long poll adds its wait to it). Default 10 s. */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
}

/** One operation: what to send and whether the server deduplicates a resend. */
export interface Call {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  /** The server deduplicates it (by Idempotency-Key or by design): resending after a lost answer is safe. */
  resendSafe?: boolean;
  idempotencyKey?: string;
  timeoutMs?: number;
}

export interface KeyOption {
  /** Your own key for this call; by default a new 256-bit one (the same on every retry of it). */
  idempotencyKey?: string;
}

/** Who approves, through what: a presentation is bound to exactly these. */
export interface Provenance {
  actor_id: string;
  identity_binding_id: string;
  channel_binding_id: string;
  conversation_key: string;
}

/** The bindings of a presentation (a `Provenance` has them). */
export type Bindings = Pick<Provenance, "identity_binding_id" | "channel_binding_id" | "conversation_key">;

export interface PresentOptions extends KeyOption {
  /** Default: the proposal answer's version. */
  version?: number;
  ttl_seconds?: number;
  /** A quorum member's own presentation (only for a version a policy asks a quorum for). */
  actor_id?: string;
}

interface Verdict {
  error: LedgerClientError;
  retry: boolean;
  retryAfter?: number | undefined;
}

type ProposalRef = string | ProposalOut | ProposalViewOut;
type AttemptRef = string | ApprovalOut | AttemptOut;

/** A fresh 256-bit key (43 URL-safe characters): one per logical call. */
export function newIdempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const seg = (value: string): string => encodeURIComponent(value);
const sleepFor = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// Node's fetch (undici) names why a connection failed; these happen before the request is sent.
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT", "EHOSTUNREACH"]);

function neverSent(error: unknown): boolean {
  let cause: unknown = error;
  for (let depth = 0; depth < 4 && cause instanceof Error; depth += 1) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string" && NOT_SENT.has(code)) return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

/** "fetch failed (ECONNREFUSED)": the message and the innermost cause's code. */
function describeFailure(failure: unknown): string {
  let text = failure instanceof Error ? failure.message : String(failure);
  let cause: unknown = failure instanceof Error ? failure.cause : undefined;
  while (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string") text = `${text} (${code})`;
    cause = cause.cause;
  }
  return text;
}

function proposalId(proposal: ProposalRef): string {
  return typeof proposal === "string" ? proposal : proposal.proposal_id;
}

function versionOf(proposal: ProposalRef, version: number | undefined, what: string): number {
  if (version !== undefined) return version;
  if (typeof proposal !== "string") {
    return "current_version" in proposal ? proposal.current_version : proposal.version;
  }
  throw new TypeError(`${what}: give version with a proposal id`);
}

function attemptId(attempt: AttemptRef): string {
  if (typeof attempt === "string") return attempt;
  if (!attempt.attempt_id) throw new TypeError("a vote_recorded answer has no attempt yet (the quorum is not met)");
  return attempt.attempt_id;
}

/** A client of one ledger server, acting with one bearer token. */
export class LedgerClient {
  readonly apiUrl: string;
  private readonly token: TokenSource | undefined;
  private readonly timeoutMs: number;
  private readonly retry: RetryPolicy;
  private readonly fetchImpl: typeof fetch;
  private readonly sleep: (ms: number) => Promise<void>;

  /** `baseUrl` is the server's root (`http://127.0.0.1:8000`) or its API prefix. */
  constructor(baseUrl: string, options: ClientOptions = {}) {
    const root = baseUrl.replace(/\/+$/, "");
    this.apiUrl = root.endsWith(API_PREFIX) ? root : root + API_PREFIX;
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.sleep = options.sleep ?? sleepFor;
  }

  /** Send one operation, retrying as the policy allows; the parsed answer or a `LedgerClientError`. */
  async call<T>(call: Call): Promise<T> {
    const key = call.method === "POST" ? (call.idempotencyKey ?? newIdempotencyKey()) : undefined;
    const budget = new Budget(this.retry);
    for (;;) {
      const outcome = await this.once<T>(call, key);
      if ("value" in outcome) return outcome.value;
      const delay = outcome.retry ? budget.nextDelay(outcome.retryAfter) : undefined;
      if (delay === undefined) throw outcome.error;
      await this.sleep(delay);
    }
  }

  /** One try: the answer, or an error and whether it may be tried again. */
  private async once<T>(call: Call, key: string | undefined): Promise<{ value: T } | Verdict> {
    let response: Response;
    try {
      response = await this.fetchImpl(this.url(call), await this.init(call, key));
    } catch (failure) {
      const error = new LedgerConnectionError(describeFailure(failure));
      // Never sent: always safe to send. Sent, answer lost: only what the server deduplicates.
      return { error, retry: neverSent(failure) || call.resendSafe !== false };
    }
    let body: unknown;
    try {
      body = JSON.parse(await response.text());
    } catch {
      body = undefined;
    }
    if (response.ok) {
      if (body === null || typeof body !== "object") {
        const error = new UnexpectedResponse(`HTTP ${response.status}: not a JSON object`, { status: response.status });
        return { error, retry: false };
      }
      return { value: body as T };
    }
    const error = errorFromAnswer(response.status, body);
    const retry = RETRY_STATUSES.has(response.status) || RETRY_CODES.has(error.code);
    return { error, retry, retryAfter: retryAfterMs(response.headers) };
  }

  private url(call: Call): string {
    const url = new URL(this.apiUrl + call.path);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    return url.toString();
  }

  private async init(call: Call, key: string | undefined): Promise<RequestInit> {
    const headers: Record<string, string> = { Accept: "application/json" };
    const token = typeof this.token === "function" ? await this.token() : this.token;
    if (token) headers.Authorization = `Bearer ${token}`;
    if (key !== undefined) headers["Idempotency-Key"] = key;
    const init: RequestInit = {
      method: call.method,
      headers,
      signal: AbortSignal.timeout(call.timeoutMs ?? this.timeoutMs),
    };
    if (call.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(call.body);
    }
    return init;
  }

  // -- proposer -----------------------------------------------------------------------

  /** Every executor build the server hosts, newest first per capability. */
  executors(): Promise<ExecutorListOut> {
    return this.call({ method: "GET", path: "/executors" });
  }

  /** A spec on the newest available build of `capability` (see `pickBuild`); it
   * expires in 24 hours unless `expires_at` says otherwise. */
  async buildSpec(capability: string, content: Record<string, unknown>, fields: SpecFields): Promise<ProposalSpec> {
    return makeSpec(pickBuild(await this.executors(), capability), content, fields);
  }

  /** Store a proposal (with `lineage_id`: its next version, superseding the last). */
  propose(
    actor: string | Provenance,
    spec: ProposalSpec,
    options: KeyOption & { lineage_id?: string; expected_version?: number } = {},
  ): Promise<ProposalOut> {
    const { idempotencyKey, ...rest } = options;
    const actorId = typeof actor === "string" ? actor : actor.actor_id;
    return this.call({ method: "POST", path: "/proposals", body: { actor_id: actorId, spec, ...rest }, idempotencyKey });
  }

  /** A single-use presentation for `to` (its token is in this answer only). */
  present(proposal: ProposalRef, to: Bindings, options: PresentOptions = {}): Promise<PresentationOut> {
    const body: PresentationIn = {
      version: versionOf(proposal, options.version, "present"),
      identity_binding_id: to.identity_binding_id,
      channel_binding_id: to.channel_binding_id,
      conversation_key: to.conversation_key,
    };
    if (options.ttl_seconds !== undefined) body.ttl_seconds = options.ttl_seconds;
    if (options.actor_id !== undefined) body.actor_id = options.actor_id;
    return this.call({
      method: "POST",
      path: `/proposals/${seg(proposalId(proposal))}/presentations`,
      body,
      idempotencyKey: options.idempotencyKey,
    });
  }

  /** Versions, statuses, hashes, presentations (never tokens) and attempt ids. */
  getProposal(id: string): Promise<ProposalViewOut> {
    return this.call({ method: "GET", path: `/proposals/${seg(id)}` });
  }

  /** Withdraw a presented version; no attempt can come from it afterwards. */
  cancel(proposal: ProposalRef, options: KeyOption & { version?: number } = {}): Promise<ProposalViewOut> {
    return this.call({
      method: "POST",
      path: `/proposals/${seg(proposalId(proposal))}/cancel`,
      body: { version: versionOf(proposal, options.version, "cancel") },
      idempotencyKey: options.idempotencyKey,
    });
  }

  // -- channel ------------------------------------------------------------------------

  /** Claim the proposal and queue its one attempt (never executes anything). A repeat
   * answers the stored attempt. A quorum member's vote that is not the M-th answers
   * `vote_recorded` with `votes` and `required`, and no attempt yet. */
  approve(token: string, options: { provenance?: Provenance } = {}): Promise<ApprovalOut> {
    // A channel service asserts who approved, for a binding of its own channel; a
    // per-conversation channel token carries its own provenance.
    const body: ApprovalIn = options.provenance ? { token, provenance: options.provenance } : { token };
    return this.call({ method: "POST", path: "/approvals", body });
  }

  /** The actor says no: the proposal is declined, no attempt is made (`provenance`:
   * as for `approve`). */
  decline(token: string, options: { provenance?: Provenance } = {}): Promise<DeclineOut> {
    const body = options.provenance ? { token, provenance: options.provenance } : { token };
    return this.call({ method: "POST", path: "/declines", body });
  }

  /** An actor's proposals in one status (by default what it still has to approve). */
  inbox(actorId: string, options: { status?: string; limit?: number; cursor?: string } = {}): Promise<InboxOut> {
    return this.call({ method: "GET", path: "/proposals", query: { actor_id: actorId, status: "presented", ...options } });
  }

  // -- attempts -----------------------------------------------------------------------

  /** The redacted status of an attempt. */
  attempt(attempt: AttemptRef): Promise<AttemptOut> {
    return this.call({ method: "GET", path: `/execution-attempts/${seg(attemptId(attempt))}` });
  }

  /** The status once the attempt is settled, or at `timeoutMs` with its status then
   * (check it with `settled()`): long polls of at most 30 s each. */
  async wait(attempt: AttemptRef, options: { timeoutMs?: number } = {}): Promise<AttemptOut> {
    const deadline = this.retry.now() + (options.timeoutMs ?? 60_000);
    for (;;) {
      const remaining = (deadline - this.retry.now()) / 1000;
      const seconds = Math.max(1, Math.min(MAX_WAIT_SECONDS, Math.floor(remaining)));
      const answer = await this.call<AttemptOut>({
        method: "GET",
        path: `/execution-attempts/${seg(attemptId(attempt))}`,
        query: { wait: seconds },
        timeoutMs: seconds * 1000 + this.timeoutMs,
      });
      if (settled(answer) || deadline - this.retry.now() <= 0) return answer;
    }
  }

  /** Attempts in one status, oldest change first (admin). */
  attempts(status: string, options: { limit?: number; cursor?: string } = {}): Promise<AttemptListOut> {
    return this.call({ method: "GET", path: "/execution-attempts", query: { status, ...options } });
  }

  /** Run the attempt's registered read-only reconciler (admin). */
  reconcile(attemptIdValue: string, expectedRevision: number): Promise<AttemptOut> {
    return this.call({
      method: "POST",
      path: `/execution-attempts/${seg(attemptIdValue)}/reconcile`,
      body: { expected_revision: expectedRevision },
    });
  }

  /** Settle `outcome_unknown`: `effect_applied` or `no_effect` (admin). */
  resolve(
    attemptIdValue: string,
    body: { expected_revision: number; resolution: "effect_applied" | "no_effect"; reason: string; receipt?: Record<string, string | number | boolean> },
  ): Promise<AttemptOut> {
    return this.call({ method: "POST", path: `/execution-attempts/${seg(attemptIdValue)}/resolve`, body });
  }

  // -- directory (admin) --------------------------------------------------------------

  /** Create, enable or disable an actor; `groups` are what policies see of it. */
  putActor(actorId: string, enabled = true, groups?: string[]): Promise<ActorOut> {
    const body = groups === undefined ? { enabled } : { enabled, groups };
    return this.call({ method: "PUT", path: `/directory/actors/${seg(actorId)}`, body });
  }

  putIdentityBinding(
    bindingId: string,
    body: { actor_id: string; channel: string; external_id: string; active?: boolean },
  ): Promise<IdentityBindingOut> {
    return this.call({
      method: "PUT",
      path: `/directory/identity-bindings/${seg(bindingId)}`,
      body: { active: true, ...body },
    });
  }

  putChannelBinding(
    bindingId: string,
    body: { conversation_key: string; channel: string; active?: boolean },
  ): Promise<ChannelBindingOut> {
    return this.call({
      method: "PUT",
      path: `/directory/channel-bindings/${seg(bindingId)}`,
      body: { active: true, ...body },
    });
  }

  putGrant(actorId: string, permission: string, granted = true): Promise<GrantOut> {
    return this.call({
      method: "PUT",
      path: `/directory/actors/${seg(actorId)}/permissions/${seg(permission)}`,
      body: { granted },
    });
  }

  putExecutorBuild(
    capability: string,
    buildDigest: string,
    body: { delivery_mode: DeliveryMode; available?: boolean },
  ): Promise<ExecutorBuildOut> {
    return this.call({
      method: "PUT",
      path: `/directory/executor-builds/${seg(capability)}/${seg(buildDigest)}`,
      body: { available: true, ...body },
    });
  }

  putTarget(targetId: string, revision: string): Promise<TargetOut> {
    return this.call({ method: "PUT", path: `/directory/targets/${seg(targetId)}`, body: { revision } });
  }

  // -- policies and standing grants (docs/policies.md) --------------------------------

  /** The policy set: its version, the digest a spec's `policy_digest` names (null
   * without policies), its policies and, for an admin, its text. */
  policies(): Promise<PolicySetOut> {
    return this.call({ method: "GET", path: "/policies" });
  }

  /** Replace the Cedar policy set (admin; empty text removes every policy), only while
   * it is at `expectedVersion` when given (0: none yet). */
  applyPolicies(text: string, options: { expectedVersion?: number } = {}): Promise<PolicySetOut> {
    const body = options.expectedVersion === undefined ? { text } : { text, expected_version: options.expectedVersion };
    return this.call({ method: "PUT", path: "/policies", body });
  }

  /** A standing grant ("allow always"): an admin names `actor_id`, a channel grants for
   * its own actor (a channel service gives `provenance`). Never resent after a lost
   * answer (a second request would make a second grant: list the grants instead). */
  grant(body: StandingGrantIn): Promise<StandingGrantOut> {
    return this.call({ method: "POST", path: "/standing-grants", body, resendSafe: false });
  }

  /** An actor's standing grants with their uses and state, oldest first. */
  standingGrants(actorId: string): Promise<StandingGrantListOut> {
    return this.call({ method: "GET", path: "/standing-grants", query: { actor_id: actorId } });
  }

  /** One standing grant (another actor's is the same 404 as a missing one). */
  standingGrant(grantId: string): Promise<StandingGrantOut> {
    return this.call({ method: "GET", path: `/standing-grants/${seg(grantId)}` });
  }

  /** Revoke a standing grant: it approves nothing more (revoking twice is a no-op). */
  revokeGrant(grantId: string, options: { provenance?: Provenance } = {}): Promise<StandingGrantOut> {
    const body = options.provenance ? { provenance: options.provenance } : {};
    return this.call({ method: "POST", path: `/standing-grants/${seg(grantId)}/revoke`, body });
  }
}
