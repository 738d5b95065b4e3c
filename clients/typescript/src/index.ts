/**
 * TypeScript client of the execution ledger's HTTP API, for Node 20+ and browsers.
 *
 * `LedgerClient` has one method per operation; answers are typed from the
 * server's OpenAPI document; refusals throw one class per error code; every
 * POST carries an `Idempotency-Key` so retries never make a second proposal;
 * `WebhookVerifier` checks the ledger's signed webhooks with WebCrypto.
 */

export * from "./client.js";
export * from "./errors.js";
export * from "./retry.js";
export * from "./spec.js";
export * from "./types.js";
export * from "./webhooks.js";
export type { components, paths } from "./openapi.js";
