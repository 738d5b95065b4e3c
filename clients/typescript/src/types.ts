/** The request and answer types, from the server's OpenAPI document (src/openapi.ts, generated). */

import type { components } from "./openapi.js";

type Schemas = components["schemas"];

export type ProposalSpec = Schemas["ProposalSpec"];
export type Target = Schemas["Target"];
export type ProposalIn = Schemas["ProposalIn"];
export type PresentationIn = Schemas["PresentationIn"];
/** The approval body; who approves comes from the caller's credentials. */
export type ApprovalIn = Schemas["ApprovalIn"];
export type DeclineIn = Schemas["DeclineIn"];
export type CancelIn = Schemas["CancelIn"];
export type ReconcileIn = Schemas["ReconcileIn"];
export type ResolveIn = Schemas["ResolveIn"];
export type ProposalOut = Schemas["ProposalOut"];
export type PresentationOut = Schemas["PresentationOut"];
export type ApprovalOut = Schemas["ApprovalOut"];
export type DeclineOut = Schemas["DeclineOut"];
export type ProposalViewOut = Schemas["ProposalViewOut"];
export type InboxOut = Schemas["InboxOut"];
export type AttemptOut = Schemas["AttemptOut"];
export type AttemptListOut = Schemas["AttemptListOut"];
export type ExecutorOut = Schemas["ExecutorOut"];
export type ExecutorListOut = Schemas["ExecutorListOut"];
export type DeliveryMode = Schemas["DeliveryMode"];
export type ActorOut = Schemas["ActorOut"];
export type IdentityBindingIn = Schemas["IdentityBindingIn"];
export type IdentityBindingOut = Schemas["IdentityBindingOut"];
export type ChannelBindingIn = Schemas["ChannelBindingIn"];
export type ChannelBindingOut = Schemas["ChannelBindingOut"];
export type GrantOut = Schemas["GrantOut"];
export type ExecutorBuildOut = Schemas["ExecutorBuildOut"];
export type TargetOut = Schemas["TargetOut"];
/** How a proposal version was approved: human, quorum, policy or grant (ids only). */
export type AttemptApproval = Schemas["AttemptApproval"];
export type PolicySetIn = Schemas["PolicySetIn"];
export type PolicySetOut = Schemas["PolicySetOut"];
export type ConditionIn = Schemas["ConditionIn"];
export type StandingGrantIn = Schemas["StandingGrantIn"];
export type StandingGrantOut = Schemas["StandingGrantOut"];
export type StandingGrantListOut = Schemas["StandingGrantListOut"];

/** Where a wait ends: a terminal status, or `outcome_unknown` (waiting for a human). */
export const SETTLED_STATUSES: ReadonlySet<string> = new Set([
  "succeeded",
  "failed_safe",
  "outcome_unknown",
  "manually_resolved",
  "effect_after_no_effect",
]);

export function settled(attempt: AttemptOut): boolean {
  return SETTLED_STATUSES.has(attempt.status);
}
