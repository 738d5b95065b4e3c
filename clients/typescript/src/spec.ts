/**
 * Building a proposal spec from what the server hosts (`GET /executors`).
 *
 * The server decides which executor build runs an effect and which schema its
 * content follows; the proposer decides everything else. `pickBuild` takes
 * the newest available build of a capability (the listing comes newest first
 * per capability) and `makeSpec` fills `executor_build` and `schema_digest`
 * from it. The two other digests are the proposer's own and have no default:
 * each is a `sha256:<64 hex>` of something the proposer holds (the build of
 * the code that proposes, the policy it applied; the ledger's design document
 * says what each binds), and all of them are inside the payload hash, so an
 * approval is bound to exactly those values.
 */

import { NoAvailableBuild } from "./errors.js";
import type { ExecutorListOut, ExecutorOut, ProposalSpec, Target } from "./types.js";

/** How long a spec stays approvable when no `expires_at` is given. */
export const DEFAULT_EXPIRES_IN_MS = 24 * 3600 * 1000;

/** The digests a proposer binds into each spec, each `sha256:<64 hex>`, its own to
 * compute: the ledger puts them inside the payload hash and the preview, so an
 * approval is bound to exactly these values. */
export interface SpecDigests {
  /** The build of the code that proposes (the assistant's own build). */
  plugin_build: string;
  /** The policy the proposer applied in deciding to propose. */
  policy_digest: string;
  /** The content schema the proposer wrote its content for. Absent (the usual
   * case): the build's, as `GET /executors` lists it. Given, it is sent as is,
   * so a build whose schema changed since is refused (422 `invalid_spec` at
   * `/spec/schema_digest`) instead of taking content written for another schema. */
  schema_digest?: string;
}

/** What a spec needs besides the build and the content: every field is the proposer's. */
export interface SpecFields {
  permission: string;
  effect: string;
  destination: string;
  digests: SpecDigests;
  sources?: string[];
  target?: Target;
  /** Default: 24 hours from now. */
  expires_at?: Date | string;
}

/** `sha256:<64 hex>` of some bytes (a text as UTF-8): the form of every digest field. */
export async function sha256Digest(data: string | Uint8Array): Promise<string> {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : new Uint8Array(data);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return `sha256:${Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** The newest available build of `capability`; `NoAvailableBuild` when none is. */
export function pickBuild(listing: ExecutorListOut | ExecutorOut[], capability: string): ExecutorOut {
  const items = Array.isArray(listing) ? listing : listing.items;
  const hosted = items.filter((item) => item.capability === capability);
  const found = hosted.find((item) => item.available);
  if (found !== undefined) return found;
  const why = hosted.length > 0 ? "the directory allows none of its builds" : "the server hosts no build of it";
  throw new NoAvailableBuild(`capability '${capability}': ${why}`);
}

/** A spec on `build`: its capability, exact build digest and schema digest. */
export function makeSpec(
  build: ExecutorOut,
  content: Record<string, unknown>,
  fields: SpecFields,
  now: Date = new Date(),
): ProposalSpec {
  const expires = fields.expires_at ?? new Date(now.getTime() + DEFAULT_EXPIRES_IN_MS);
  const spec: ProposalSpec = {
    capability: build.capability,
    executor_build: build.executor_build,
    plugin_build: fields.digests.plugin_build,
    schema_digest: fields.digests.schema_digest ?? build.schema_digest,
    policy_digest: fields.digests.policy_digest,
    permission: fields.permission,
    effect: fields.effect,
    destination: fields.destination,
    content,
    sources: fields.sources ?? [],
    expires_at: typeof expires === "string" ? expires : expires.toISOString(),
  };
  if (fields.target !== undefined) spec.target = fields.target;
  return spec;
}
