// A real `ledger serve` for the tests (SQLite in a temporary folder), its tokens,
// and a loopback proxy in front of it that can lose one answer or refuse once.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import type { Provenance } from "../src/index.js";

const PACKAGE = resolve(fileURLToPath(new URL(".", import.meta.url)), "../..");
export const LEDGER = process.env.LEDGER_BIN ?? join(PACKAGE, "../../.venv/bin/ledger");


export class LedgerServer {
  private constructor(
    readonly url: string,
    private readonly process: ChildProcess,
    private readonly env: Record<string, string>,
    private readonly folder: string,
  ) {}

  static async start(): Promise<LedgerServer> {
    const folder = mkdtempSync(join(tmpdir(), "ledger-ts-"));
    const port = await freePort();
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(process.env)) {
      if (value !== undefined && !name.startsWith("LEDGER_") && !name.startsWith("AWS_")) env[name] = value;
    }
    Object.assign(env, {
      LEDGER_STORE: "sqlite",
      LEDGER_SQLITE_PATH: join(folder, "ledger.db"),
      LEDGER_AUTH_HS256_SECRET: randomBytes(32).toString("hex"),
      PYTHONUNBUFFERED: "1",
    });
    const child = spawn(LEDGER, ["serve", "--host", "127.0.0.1", "--port", String(port)], {
      cwd: folder,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let log = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-4000);
    });
    const server = new LedgerServer(`http://127.0.0.1:${port}`, child, env, folder);
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`ledger serve exited early:\n${log}`);
      try {
        if ((await fetch(`${server.url}/readyz`)).ok) return server;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    server.stop();
    throw new Error(`ledger serve did not answer within 30 s:\n${log}`);
  }

  /** A development token signed with this server's secret (`ledger token`). */
  token(role: string, provenance?: Provenance): string {
    const args = ["token", "--sub", `${role}-ts-tester`, "--role", role];
    if (provenance !== undefined) {
      args.push(
        "--actor-id", provenance.actor_id,
        "--identity-binding-id", provenance.identity_binding_id,
        "--channel-binding-id", provenance.channel_binding_id,
        "--conversation-key", provenance.conversation_key,
      );
    }
    return execFileSync(LEDGER, args, { env: this.env, encoding: "utf8" }).trim();
  }

  /** Until the status projection has applied every event (then the inbox is complete). */
  async caughtUp(): Promise<void> {
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      const ready = (await (await fetch(`${this.url}/readyz`)).json()) as {
        details: { projections: Record<string, { events_behind: number }> };
      };
      if (Object.values(ready.details.projections).every((p) => p.events_behind === 0)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error("the projections did not catch up within 20 s");
  }

  stop(): void {
    this.process.kill("SIGTERM");
    rmSync(this.folder, { recursive: true, force: true });
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const probe = http.createServer();
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolvePort(port));
    });
    probe.on("error", reject);
  });
}

export interface Seen {
  method: string;
  path: string;
  key: string | undefined;
  action: "forwarded" | "drop" | "refuse";
  status?: number;
  answer?: string;
}

interface Rule {
  action: "drop" | "refuse";
  method: string;
  path: string;
  status?: number;
  headers?: Record<string, string>;
}

/** Forwards to the server; a `drop` rule lets the server answer and closes the
 * connection without passing the answer on, a `refuse` rule answers itself. */
export class FaultProxy {
  readonly seen: Seen[] = [];
  private readonly rules: Rule[] = [];
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(upstream: string): Promise<FaultProxy> {
    let proxy: FaultProxy | undefined;
    const server = http.createServer((request, response) => {
      void proxy!.handle(upstream, request, response);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as AddressInfo;
    proxy = new FaultProxy(server, `http://127.0.0.1:${port}`);
    return proxy;
  }

  drop(method: string, path: string): void {
    this.rules.push({ action: "drop", method, path });
  }

  refuse(method: string, path: string, status: number, headers: Record<string, string> = {}): void {
    this.rules.push({ action: "refuse", method, path, status, headers });
  }

  private async handle(upstream: string, request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const method = request.method ?? "GET";
    const path = request.url ?? "/";
    const key = request.headers["idempotency-key"] as string | undefined;
    const index = this.rules.findIndex((r) => r.method === method && path.split("?")[0]!.startsWith(r.path));
    const rule = index >= 0 ? this.rules.splice(index, 1)[0] : undefined;
    if (rule?.action === "refuse") {
      this.seen.push({ method, path, key, action: "refuse", status: rule.status });
      response.writeHead(rule.status!, { "content-type": "application/json", ...rule.headers });
      response.end(JSON.stringify({ error: "store_unavailable", detail: "The store is unavailable." }));
      return;
    }
    const headers = new Headers();
    for (const [name, value] of Object.entries(request.headers)) {
      if (typeof value === "string" && !["host", "connection", "content-length"].includes(name)) headers.set(name, value);
    }
    const init: RequestInit = { method, headers };
    if (chunks.length > 0) init.body = Buffer.concat(chunks);
    const answer = await fetch(upstream + path, init);
    const text = await answer.text();
    this.seen.push({ method, path, key, action: rule ? "drop" : "forwarded", status: answer.status, answer: text });
    if (rule !== undefined) {
      request.socket.destroy(); // the server answered; the client never hears it
      return;
    }
    response.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
    response.end(text);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}
