/**
 * One error class per error code of the ledger's uniform error body
 * `{"error": <code>, "detail": <safe text>}`. Each is a `LedgerClientError`
 * with `code`, `status` and `detail`; the input refusals (422) extend
 * `InvalidInput`, as on the server, and one about the request's fields also
 * carries `errors` (every failing field by its JSON pointer) and `errorCount`.
 * A code this client does not know yet raises the base class with that code.
 */

/** One failing field of a refused request (the server's `FieldErrorOut`). */
export interface FieldError {
  /** A JSON pointer into the request body (`/spec/content/title`), or `/` and a parameter's name. */
  pointer: string;
  /** What the field needs, never what was sent. */
  message: string;
  /** `body`, or `query`, `path` or `header` for a parameter. */
  location: string;
}

export interface ErrorOptions {
  status?: number;
  code?: string;
  errors?: readonly FieldError[];
  errorCount?: number;
}

export class LedgerClientError extends Error {
  static readonly code: string = "ledger_error";
  readonly code: string;
  /** 0: no HTTP answer came (the connection failed, or the client itself refused). */
  readonly status: number;
  readonly detail: string;
  /** Every failing field the server listed (empty unless it is a field error). */
  readonly errors: readonly FieldError[];
  /** How many failing fields the server found (more than listed past its bound). */
  readonly errorCount: number;

  constructor(detail: string, options: ErrorOptions = {}) {
    super(detail);
    this.name = new.target.name;
    this.detail = detail;
    this.status = options.status ?? 0;
    this.code = options.code ?? (new.target as typeof LedgerClientError).code;
    this.errors = options.errors ?? [];
    this.errorCount = options.errorCount ?? this.errors.length;
  }
}

function errorClass<P extends typeof LedgerClientError>(parent: P, name: string, code: string): P {
  const Parent: typeof LedgerClientError = parent;
  const cls = { [name]: class extends Parent {} }[name];
  Object.defineProperty(cls, "code", { value: code });
  return cls as unknown as P;
}

export class InvalidInput extends LedgerClientError {
  static override readonly code: string = "invalid_input";
}
export const InvalidSpec = errorClass(InvalidInput, "InvalidSpec", "invalid_spec");
export const UnknownPermission = errorClass(InvalidInput, "UnknownPermission", "unknown_permission");
/** Propose: the directory has no such actor. */
export const UnknownActor = errorClass(InvalidInput, "UnknownActor", "unknown_actor");
/** Propose: the actor is disabled in the directory. */
export const ActorDisabled = errorClass(InvalidInput, "ActorDisabled", "actor_disabled");
/** Propose: the actor does not hold the spec's permission. */
export const PermissionNotGranted = errorClass(InvalidInput, "PermissionNotGranted", "permission_not_granted");
export class ExecutorBuildUnavailable extends InvalidInput {
  static override readonly code: string = "executor_build_unavailable";
}
export const ExecutorBuildDraining = errorClass(
  InvalidInput,
  "ExecutorBuildDraining",
  "executor_build_draining",
);
export const NondeterministicRenderer = errorClass(
  InvalidInput,
  "NondeterministicRenderer",
  "nondeterministic_renderer",
);
export const IdempotencyKeyRefused = errorClass(
  InvalidInput,
  "IdempotencyKeyRefused",
  "idempotency_key_refused",
);
export class CommitTooLarge extends LedgerClientError {
  static override readonly code: string = "commit_too_large";
}
export const EventTooLarge = errorClass(CommitTooLarge, "EventTooLarge", "event_too_large");

/** The Cedar policy set does not parse or breaks a rule of the ledger's. */
export const InvalidPolicySet = errorClass(InvalidInput, "InvalidPolicySet", "invalid_policy_set");

const base = LedgerClientError;
/** A `forbid` policy holds for this proposal; the detail names the policy ids. */
export const PolicyDenied = errorClass(base, "PolicyDenied", "policy_denied");
/** The spec's `policy_digest` is not the current set's: read `policies()` again. */
export const PolicyDigestMismatch = errorClass(base, "PolicyDigestMismatch", "policy_digest_mismatch");
export const StalePolicySet = errorClass(base, "StalePolicySet", "stale_policy_set");
export const StandingGrantRefused = errorClass(base, "StandingGrantRefused", "standing_grant_refused");
export const TooManyStandingGrants = errorClass(base, "TooManyStandingGrants", "too_many_standing_grants");
export const NotFound = errorClass(base, "NotFound", "not_found");
export const ApprovalUnavailable = errorClass(base, "ApprovalUnavailable", "approval_unavailable");
export const ConcurrencyConflict = errorClass(base, "ConcurrencyConflict", "concurrency_conflict");
export const LookupConflict = errorClass(base, "LookupConflict", "lookup_conflict");
export const IdempotencyKeyInUse = errorClass(base, "IdempotencyKeyInUse", "idempotency_key_in_use");
export const ProposalClaimed = errorClass(base, "ProposalClaimed", "proposal_claimed");
export const StaleVersion = errorClass(base, "StaleVersion", "stale_version");
export const ProposalConflicted = errorClass(base, "ProposalConflicted", "proposal_conflicted");
export const StaleRevision = errorClass(base, "StaleRevision", "stale_revision");
export const NotOutcomeUnknown = errorClass(base, "NotOutcomeUnknown", "not_outcome_unknown");
export const IllegalTransition = errorClass(base, "IllegalTransition", "illegal_transition");
export const ReconcilerUnavailable = errorClass(base, "ReconcilerUnavailable", "reconciler_unavailable");
export const TooManyPresentations = errorClass(base, "TooManyPresentations", "too_many_presentations");
export const ExecutorNoEffect = errorClass(base, "ExecutorNoEffect", "executor_no_effect");
export const ExecutorOutcomeUncertain = errorClass(
  base,
  "ExecutorOutcomeUncertain",
  "executor_outcome_uncertain",
);
export const ExecutorReceiptUnusable = errorClass(
  base,
  "ExecutorReceiptUnusable",
  "executor_receipt_unusable",
);
export const StoreUnavailable = errorClass(base, "StoreUnavailable", "store_unavailable");
export const DigestInvalid = errorClass(base, "DigestInvalid", "digest_invalid");
export const Unauthenticated = errorClass(base, "Unauthenticated", "unauthenticated");
export const Forbidden = errorClass(base, "Forbidden", "forbidden");
export const MethodNotAllowed = errorClass(base, "MethodNotAllowed", "method_not_allowed");
export const PayloadTooLarge = errorClass(base, "PayloadTooLarge", "payload_too_large");
export const UnsupportedMediaType = errorClass(base, "UnsupportedMediaType", "unsupported_media_type");
export const HttpError = errorClass(base, "HttpError", "http_error");
export const InternalError = errorClass(base, "InternalError", "internal_error");
/** 429 from the server or a gateway in front of it (retried by the client). */
export const TooManyRequests = errorClass(base, "TooManyRequests", "too_many_requests");

// Raised by the client itself.
/** No answer: the connection failed or timed out, on every try the policy allowed. */
export const LedgerConnectionError = errorClass(base, "LedgerConnectionError", "connection_failed");
/** The answer was not what the API documents (not JSON, wrong shape). */
export const UnexpectedResponse = errorClass(base, "UnexpectedResponse", "unexpected_response");
/** The server hosts no available build of the capability (found before proposing). */
export const NoAvailableBuild = errorClass(ExecutorBuildUnavailable, "NoAvailableBuild", "no_available_build");
/** A webhook delivery's signature or timestamp does not verify: drop it (answer 4xx). */
export const WebhookVerificationError = errorClass(base, "WebhookVerificationError", "webhook_invalid");

const ALL: (typeof LedgerClientError)[] = [
  InvalidInput, InvalidSpec, UnknownPermission, UnknownActor, ActorDisabled, PermissionNotGranted,
  ExecutorBuildUnavailable, ExecutorBuildDraining,
  NondeterministicRenderer,
  IdempotencyKeyRefused, CommitTooLarge, EventTooLarge, NotFound, ApprovalUnavailable,
  ConcurrencyConflict, LookupConflict, IdempotencyKeyInUse, ProposalClaimed, StaleVersion,
  ProposalConflicted, StaleRevision, NotOutcomeUnknown, IllegalTransition, ReconcilerUnavailable,
  TooManyPresentations, ExecutorNoEffect, ExecutorOutcomeUncertain, ExecutorReceiptUnusable,
  StoreUnavailable, DigestInvalid, Unauthenticated, Forbidden, MethodNotAllowed, PayloadTooLarge,
  UnsupportedMediaType, HttpError, InternalError, TooManyRequests, LedgerConnectionError,
  UnexpectedResponse, NoAvailableBuild, WebhookVerificationError, InvalidPolicySet, PolicyDenied,
  PolicyDigestMismatch, StalePolicySet, StandingGrantRefused, TooManyStandingGrants,
];

/** Every error class by its code (the server's codes and the client's own). */
export const ERRORS_BY_CODE: ReadonlyMap<string, typeof LedgerClientError> = new Map(
  ALL.map((cls) => [cls.code, cls]),
);

/** The error of a non-2xx answer: the uniform body's code, else one by status. */
export function errorFromAnswer(status: number, body: unknown): LedgerClientError {
  if (body !== null && typeof body === "object" && typeof (body as { error?: unknown }).error === "string") {
    const { error: code, detail, errors, error_count: count } = body as {
      error: string;
      detail?: unknown;
      errors?: unknown;
      error_count?: unknown;
    };
    const cls = ERRORS_BY_CODE.get(code) ?? LedgerClientError;
    const problems = fieldErrors(errors);
    const errorCount =
      typeof count === "number" && Number.isInteger(count) && count >= problems.length ? count : undefined;
    return new cls(typeof detail === "string" ? detail : code, { status, code, errors: problems, errorCount });
  }
  const cls = status === 429 ? TooManyRequests : status >= 500 ? InternalError : HttpError;
  return new cls(`HTTP ${status} without the ledger's error body`, { status });
}

/** The body's `errors`, each kept only when it has the documented shape. */
function fieldErrors(listed: unknown): FieldError[] {
  if (!Array.isArray(listed)) return [];
  const found: FieldError[] = [];
  for (const item of listed as unknown[]) {
    if (item === null || typeof item !== "object") continue;
    const { pointer, message, location } = item as Record<string, unknown>;
    if (typeof pointer !== "string" || typeof message !== "string") continue;
    found.push({ pointer, message, location: typeof location === "string" ? location : "body" });
  }
  return found;
}
