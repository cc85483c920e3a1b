#!/usr/bin/env node
// A careful AR-08 worker in Node.js (standard library only) for `crashlab integrate`.
//
//   node worker.js URL DB [--mistake=NAME]
//
// URL is the worker's base URL ({url}); DB is the SQLite file ({db}). Node has no SQLite
// driver in its standard library, so the store is written through the `sqlite3` command-line
// shell (apt-get install sqlite3), one transaction per call; every write is fenced by the
// lease epoch inside the same transaction.
//
// Approvals: before anything is prepared the worker asks the sandbox's authority whether an approval
// bound to the proposal's hash is live. A run with a standing approval goes on at once; otherwise it
// requests one and waits durably (WAITING_HUMAN, next owner the approver): crashlab starts the run's
// next worker when the approval (or anything else) reaches its inbox. Before every send it asks again;
// a revoked approval, or a policy that denies it, ends the run with nothing sent (FAILED_NO_EFFECT).
//
// Mistakes (each plants one known bug, for showing that crashlab catches it):
//   --mistake=blind_retry         resend at once after a 5xx or a closed connection
//   --mistake=sent_unknown_after  append SENT_UNKNOWN after the answer, not before the send
//   --mistake=no_approval_check   never ask the authority: send without a live approval bound to the proposal
//   --mistake=reads_old_schema    after a deployment, read the old version's checkpoint as this version's own
//   --mistake=release_without_authority  compensate a cancelled confirmed hold without an approval of the release's own
//
// Compensation: a cancellation found after the hold was confirmed is answered with a release, where the
// service offers one (`compensation` in its profile), as the Python worker does: a separate effect with its
// own key, its own proposal and its own approval (asked of the authority with action `release`), prepared in
// the ledger (a compensation entry, the original at COMPENSATION_PROPOSED, a COMPENSATING checkpoint) and
// recorded SENT_UNKNOWN before each send, then verified by a lookup of the original's key. Verified: the
// original COMPENSATED, CANCELLED_NO_EFFECT; unread: CANCELLED_EFFECT_UNKNOWN; refused or denied:
// CANCELLED_EFFECT_REMAINS; both records kept.
//
// Deployments: the worker runs the versions crashlab gives it (CRASHLAB_CODE_VERSION, CRASHLAB_SCHEMA_VERSION,
// ...; 1 when absent) and writes them as each checkpoint's contract. Before it acts it compares them with the
// run's latest checkpoint: a schema-1 checkpoint under schema 2 is migrated (a MIGRATING checkpoint with its
// transformation record, no effect); any other difference is pinned to the old code (a PINNED finish naming the
// old versions in packet.pinned_env; crashlab drains the run with --worker).
"use strict";

const http = require("http");
const crypto = require("crypto");
const { spawnSync } = require("child_process");

const URL_BASE = process.argv[2] || process.env.CRASHLAB_URL;
const DB = process.argv[3] || process.env.CRASHLAB_DB;
const MISTAKE = (process.argv.find((a) => a.startsWith("--mistake=")) || "").slice("--mistake=".length);
const MISTAKES = ["blind_retry", "sent_unknown_after", "no_approval_check", "reads_old_schema", "release_without_authority"];
const VERSIONS = ["code_version", "schema_version", "canonicalization_version", "policy_version", "capability_version"];
const CONTRACT = VERSIONS.slice(1);     // the versions whose change can make an old checkpoint mean something else
const MINE = Object.fromEntries(VERSIONS.map((k) => [k, Number(process.env[`CRASHLAB_${k.toUpperCase()}`] || "1")]));
// (version:from:to) -> what the tested migration changes: the only one this worker has
const MIGRATIONS = { "schema_version:1:2": "contract.schema_version: 1 -> 2 (the same fields, kept as they were)" };
const WORKER = process.env.CRASHLAB_WORKER || "worker";
const RUN = process.env.CRASHLAB_RUN || "run";
const EPOCH = Number(process.env.CRASHLAB_EPOCH || "1");
const LEASE_TTL_SCENARIO_MS = 30000;
const ATTEMPT_CEILING = 3;
const TERMINAL = new Set(["SUCCEEDED", "FAILED_NO_EFFECT", "FAILED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN",
  "CANCELLED_NO_EFFECT", "CANCELLED_EFFECT_REMAINS", "CANCELLED_EFFECT_UNKNOWN"]);
// the states this worker checkpoints, in order (docs/invariants.md, legal run-state transitions)
const PATH = ["VALIDATED", "PROPOSED", "EFFECT_PREPARED", "EFFECT_CONFIRMED", "NOTIFYING"];

function log(...args) { process.stderr.write(`[${WORKER}] ${args.join(" ")}\n`); }
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, Math.round(ms))));

class Stop extends Error {}      // lease lost: stop quietly, exit 0
class Done extends Error {}      // the finish row is written: the worker's life ends here

// ---------------------------------------------------------------- failpoints
const fpCounts = {};
function failpoint(point, boundary) {
  if (boundary === "before") fpCounts[point] = (fpCounts[point] || 0) + 1;
  for (const item of (process.env.CRASHLAB_FAILPOINT || "").split(",").filter(Boolean)) {
    const [where, nth, when] = item.split(":");
    if (where === point && Number(nth) === fpCounts[point] && when === boundary) process.kill(process.pid, "SIGKILL");
  }
}

// ---------------------------------------------------------------- the store (sqlite3 CLI)
const q = (s) => "'" + String(s).replace(/'/g, "''") + "'";

function sql(script, json = false) {
  const args = ["-bail", "-batch"];
  if (json) args.push("-json");
  args.push(DB);
  const r = spawnSync("sqlite3", args, { input: ".timeout 5000\n" + script, encoding: "utf8" });
  if (r.error) throw new Error(`sqlite3 could not start (${r.error.code}): install it with 'apt-get install sqlite3'`);
  if (r.status !== 0) throw new Error(`sqlite3 failed: ${r.stderr.trim()}`);
  if (!json) return r.stdout.trim();
  const out = r.stdout.trim();
  return out ? JSON.parse(out) : [];
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER NOT NULL,
  owner TEXT NOT NULL, expires_wall INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (version INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS finish (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL);
CREATE VIEW IF NOT EXISTS crashlab_checkpoints AS SELECT version, record FROM checkpoints;
CREATE VIEW IF NOT EXISTS crashlab_ledger AS SELECT seq, record FROM ledger;
CREATE VIEW IF NOT EXISTS crashlab_finish AS SELECT seq, record FROM finish;
INSERT OR IGNORE INTO lease VALUES (1, 0, '', 0);`;

const FENCE = `(SELECT epoch FROM lease WHERE id = 1) = ${EPOCH}`;

const store = {
  init() { sql("BEGIN IMMEDIATE;" + SCHEMA + "COMMIT;"); },
  // returns "ok", "held" (the previous holder's lease is live: wait) or "newer" (stop)
  acquire(ttlWall) {
    const now = Date.now();
    const rows = sql(`BEGIN IMMEDIATE;
      UPDATE lease SET epoch = ${EPOCH}, owner = ${q(WORKER)}, expires_wall = ${now + ttlWall}
        WHERE id = 1 AND epoch < ${EPOCH} AND expires_wall <= ${now};
      SELECT epoch, owner, expires_wall FROM lease WHERE id = 1; COMMIT;`, true);
    const l = rows[0];
    if (l.epoch === EPOCH) return { status: "ok", lease: l };
    if (l.epoch > EPOCH) return { status: "newer", lease: l };
    return { status: "held", lease: l };
  },
  release() { sql(`UPDATE lease SET expires_wall = 0 WHERE id = 1 AND epoch = ${EPOCH};`); },
  renew(ttlWall) {
    const out = sql(`BEGIN IMMEDIATE; UPDATE lease SET expires_wall = ${Date.now() + ttlWall}
      WHERE id = 1 AND epoch = ${EPOCH}; SELECT changes(); COMMIT;`);
    if (out !== "1") throw new Stop("lease lost at renew");
  },
  checkpoints() { return sql("SELECT version, record FROM checkpoints ORDER BY version;", true); },
  ledger() { return sql("SELECT seq, record FROM ledger ORDER BY seq;", true).map((r) => JSON.parse(r.record)); },
  finishes() { return sql("SELECT seq, record FROM finish ORDER BY seq;", true).map((r) => JSON.parse(r.record)); },
  append(entry) {
    failpoint("ledger.append", "before");
    const out = sql(`BEGIN IMMEDIATE; INSERT INTO ledger (record) SELECT ${q(JSON.stringify(entry))} WHERE ${FENCE};
      SELECT changes(); COMMIT;`);
    if (out !== "1") throw new Stop("lease lost at ledger.append");
    failpoint("ledger.append", "after");
  },
  writeCheckpoint(version, record) {
    failpoint("checkpoints.write", "before");
    const out = sql(`BEGIN IMMEDIATE; INSERT INTO checkpoints (version, record)
      SELECT ${version}, ${q(JSON.stringify(record))} WHERE ${FENCE}
        AND (SELECT COALESCE(MAX(version), 0) FROM checkpoints) = ${version - 1};
      SELECT changes(); COMMIT;`);
    if (out !== "1") throw new Stop("checkpoint compare-and-set refused (lease or version moved)");
    failpoint("checkpoints.write", "after");
  },
  finish(record) {
    failpoint("run.finish", "before");
    const out = sql(`BEGIN IMMEDIATE; INSERT INTO finish (record) SELECT ${q(JSON.stringify(record))} WHERE ${FENCE};
      SELECT changes(); COMMIT;`);
    if (out !== "1") throw new Stop("lease lost at run.finish");
    failpoint("run.finish", "after");
  },
};

// ---------------------------------------------------------------- HTTP
// One connection per request (no keep-alive, no client retry): the worker is the one retry owner.
function request(method, path, body, key, timeoutMs) {
  return new Promise((resolve) => {
    const u = new URL(URL_BASE + path);
    const data = body === undefined ? null : Buffer.from(JSON.stringify(body));
    const headers = { Connection: "close" };
    if (data) { headers["Content-Type"] = "application/json"; headers["Content-Length"] = data.length; }
    if (key) headers["Idempotency-Key"] = key;
    let done = false;
    const finish = (v) => { if (!done) { done = true; resolve(v); } };
    const req = http.request({ hostname: u.hostname, port: u.port, path: u.pathname + u.search, method, headers, agent: false },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("error", (e) => finish({ closed: true, detail: String(e) }));
        res.on("end", () => {
          let json = null;
          try { json = JSON.parse(Buffer.concat(chunks).toString("utf8")); } catch (e) { json = null; }
          finish({ status: res.statusCode, json, headers: res.headers });
        });
      });
    req.setTimeout(timeoutMs, () => { req.destroy(new Error("client timeout")); });
    req.on("error", (e) => finish({ closed: true, detail: String(e && e.message) }));
    if (data) req.write(data);
    req.end();
  });
}

// ---------------------------------------------------------------- helpers
function canon(v) {
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  if (v && typeof v === "object") return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
  return JSON.stringify(v);
}
const sha = (s) => crypto.createHash("sha256").update(s).digest("hex");

const sameIntent = (a, b) => !!a && !!b && canon(a) === canon(b);

// ---------------------------------------------------------------- the worker
class Worker {
  constructor() {
    this.scale = 100;
    this.anchor = { s: 0, r: Date.now() };   // scenario ms known at a real instant
    this.afterSeq = 0;
    this.events = [];
    this.eventLog = {};      // event_id -> {seq, type, disposition, duplicates}
    this.cancel = null;
    this.cp = null;          // latest checkpoint record
    this.version = 0;
    this.profiles = {};
    this.contract = { ...MINE };   // the versions this worker's checkpoints are written under
  }

  // Scenario time is not served; estimate it from the times the sandbox answers with.
  now() { return Math.round(this.anchor.s + (Date.now() - this.anchor.r) * this.scale); }
  seen(scenarioMs) { if (typeof scenarioMs === "number" && scenarioMs > this.now()) this.anchor = { s: scenarioMs, r: Date.now() }; }
  ttlWall() { return LEASE_TTL_SCENARIO_MS / this.scale; }

  async poll() {
    for (let i = 0; i < 5; i++) {
      const r = await request("GET", `/inbox?after_seq=${this.afterSeq}`, undefined, null, 5000);
      if (r.status === 200 && r.json) {
        for (const ev of r.json.events || []) {
          this.afterSeq = Math.max(this.afterSeq, ev.seq);
          this.seen(ev.at);
          const seen = this.eventLog[ev.event_id];
          if (seen) {   // a duplicate delivery: no transition, an auditable disposition in the next checkpoint
            if (seen.seq !== ev.seq && !seen.duplicates.includes(ev.seq)) seen.duplicates.push(ev.seq);
            continue;
          }
          this.eventLog[ev.event_id] = { seq: ev.seq, type: ev.type, duplicates: [],
            disposition: ev.type === "callback" ? "evidence only" : "accepted" };
          this.events.push(ev);
          if (ev.type === "cancel" && !this.cancel) this.cancel = { requested: true, seq: ev.seq, at: ev.at };
        }
        return;
      }
      await sleep(20 * (i + 1));
    }
    throw new Error("inbox unreadable");
  }

  async describe(service) {
    if (this.profiles[service]) return this.profiles[service];
    for (let i = 0; i < 5; i++) {
      const r = await request("GET", `/${service}`, undefined, null, 5000);
      if (r.status === 200 && r.json) {
        this.profiles[service] = r.json;
        if (r.json.time_scale) this.scale = r.json.time_scale;
        return r.json;
      }
      await sleep(20 * (i + 1));
    }
    throw new Error(`describe ${service} failed`);
  }

  async acquireLease() {
    for (;;) {
      const got = store.acquire(this.ttlWall());
      if (got.status === "ok") return;
      if (got.status === "newer") throw new Stop(`a newer worker holds epoch ${got.lease.epoch}`);
      await sleep(Math.min(1000, Math.max(5, got.lease.expires_wall - Date.now() + 1)));
    }
  }

  // ---- checkpoints
  record(state, extra = {}) {
    const p = this.intake.payload;
    return {
      identity: { run_id: RUN, task_id: `${p.service}.${p.operation}`, tenant: String(p.intent.tenant || ""), principal: String(p.intent.principal || "") },
      control: { state, state_version: this.version + 1, owner: WORKER, lease_epoch: EPOCH,
        event_sequence: this.afterSeq, cancellation: this.cancel || {}, deadline: p.deadline ?? null,
        budgets: { attempt_ceiling: ATTEMPT_CEILING } },
      contract: { ...this.contract },
      evidence: { proposal_hash: this.proposalHash, events: this.eventLog, ...extra },
      effects: this.effectList(),
    };
  }
  write(state, extra) {
    const rec = this.record(state, extra);
    store.writeCheckpoint(this.version + 1, rec);
    this.version += 1;
    this.cp = rec;
  }
  // move along PATH to `state`, writing each state in between (a state outside PATH, e.g. a
  // waiting state or APPROVED, resumes after PROPOSED)
  advance(state) {
    const cur = this.cp ? this.cp.control.state : null;
    let i = cur === null ? -1 : PATH.indexOf(cur);
    if (cur !== null && i < 0) i = PATH.indexOf("PROPOSED");
    for (let k = i + 1; k <= PATH.indexOf(state); k++) this.write(PATH[k]);
  }

  // ---- ledger
  latest(key) { let e = null; for (const x of this.ledger) if (x.semantic_key === key) e = x; return e; }
  effectList() {
    const keys = [];
    for (const e of this.ledger || []) if (!keys.includes(e.semantic_key)) keys.push(e.semantic_key);
    return keys.map((k) => ({ semantic_key: k, knowledge: this.latest(k).knowledge }));
  }
  append(base, knowledge, changes = {}) {
    const prev = this.latest(base.semantic_key);
    const entry = { ...(prev || base), knowledge, lease_epoch: EPOCH, ...changes };
    if (!("note" in changes)) delete entry.note;
    entry.observations = [...((prev && prev.observations) || []), ...(changes.observations || [])];
    entry.reconciliation = [...((prev && prev.reconciliation) || []), ...(changes.reconciliation || [])];
    entry.evidence = [...((prev && prev.evidence) || []), ...(changes.evidence || [])];
    store.append(entry);
    this.ledger.push(entry);
    return entry;
  }

  async finish(disposition, nextOwner = null, reason = "", extra = {}) {
    const terminal = TERMINAL.has(disposition);
    if (!this.cp || this.cp.control.state !== disposition) {
      const compensating = !!this.cp && this.cp.control.state === "COMPENSATING";   // already past both
      if (!compensating && (disposition === "SUCCEEDED" || disposition.endsWith("EFFECT_REMAINS"))) this.advance("EFFECT_CONFIRMED");
      if (!compensating && disposition.endsWith("EFFECT_UNKNOWN")) this.advance("EFFECT_PREPARED");
      this.write(disposition);
    }
    store.finish({ disposition, effects: this.effectList(), next_owner: nextOwner, reason, owner: WORKER, ...extra });
    log(`finish ${disposition}${terminal ? "" : " (waiting)"} ${reason}`);
    throw new Done(disposition);
  }

  async main() {
    store.init();
    // a run that starts later than the others gets its intake at its start time: the worker
    // may be running before it arrives, so wait for it (bounded)
    for (let waited = 0; ; waited++) {
      await this.poll();
      this.intake = this.events.find((e) => e.type === "intake");
      if (this.intake) break;
      if (waited > 2000) throw new Error("no intake event in the inbox");
      await sleep(10);
    }
    const p = this.intake.payload;
    await this.describe(p.service);
    if (p.notify) await this.describe("notification");
    await this.acquireLease();
    const cps = store.checkpoints();
    if (cps.length) { const last = cps[cps.length - 1]; this.version = last.version; this.cp = JSON.parse(last.record); }
    this.ledger = store.ledger();

    // the proposal: the action and the intake intent; the approval is bound to its hash
    this.proposalHash = sha(canon({ action: p.operation, intent: p.intent }));
    this.intent = { ...p.intent, proposal_hash: this.proposalHash };
    this.fingerprint = sha(canon(this.intent));
    this.key = `fieldops.${p.operation}.v1:${this.fingerprint.slice(0, 32)}`;

    // a terminal run only reports its recorded disposition again
    if (this.cp && TERMINAL.has(this.cp.control.state)) {
      const f = store.finishes();
      if (!f.length) store.finish({ disposition: this.cp.control.state, effects: this.effectList(),
        next_owner: null, reason: "replayed the recorded disposition", owner: WORKER });
      return;
    }
    if (this.cp && MISTAKE !== "reads_old_schema") await this.compatible();
    if (this.cp && this.cp.control.cancellation && this.cp.control.cancellation.requested) this.cancel = this.cp.control.cancellation;
    if (!this.cp) this.write("VALIDATED");

    // the compensation: its own identity, proposal and approval
    this.releaseIntent = { tenant: p.intent.tenant, principal: p.intent.principal, releases: this.key };
    this.releaseHash = sha(canon({ action: "release", intent: this.releaseIntent }));
    this.releaseKey = `fieldops.release.v1:${sha(canon(this.releaseIntent)).slice(0, 32)}`;
    const original = this.latest(this.key);
    if (original && original.knowledge === "COMPENSATION_PROPOSED") return this.compensate();   // a restart while compensating
    if (original && original.knowledge === "COMPENSATED") {
      return this.finish("CANCELLED_NO_EFFECT", null, "cancelled; the hold was released and the release verified");
    }

    const outcome = await this.effect({ service: p.service, operation: p.operation, key: this.key,
      intent: this.intent, fingerprint: this.fingerprint });
    if (outcome !== "CONFIRMED") return;
    this.advance("EFFECT_CONFIRMED");
    await this.poll();
    if (this.cancel && (this.profiles[p.service] || {}).compensation) return this.compensate();
    if (this.cancel) return this.finish("CANCELLED_EFFECT_REMAINS", null, "cancelled after the hold was confirmed; the hold remains");
    if (p.notify) {
      const ref = this.latest(this.key).remote_ref;
      const nIntent = { to: String(p.intent.principal || p.intent.tenant), message: `reserved ${ref} for ${p.intent.incident || ""}`,
        proposal_hash: this.proposalHash };
      const nFp = sha(canon(nIntent));
      const n = await this.effect({ service: "notification", operation: "send", key: `fieldops.notify.v1:${nFp.slice(0, 32)}`,
        intent: nIntent, fingerprint: nFp, notify: true });
      if (n !== "CONFIRMED") return;
    }
    await this.finish("SUCCEEDED");
  }

  // The run's checkpoint against this code's versions (AR-08, "Deployment compatibility"): the same versions go
  // on; a tested migration writes MIGRATING with its record, then the pre-migration state under the new contract;
  // anything else pins the run to the old code (the finish throws Done).
  async compatible() {
    const old = Object.fromEntries(VERSIONS.map((k) => [k, (this.cp.contract || {})[k] ?? MINE[k]]));
    const differing = CONTRACT.filter((k) => old[k] !== MINE[k]);
    if (!differing.length) return;
    const pick = (v) => Object.fromEntries(CONTRACT.map((k) => [k, v[k]]));
    if (differing.every((k) => MIGRATIONS[`${k}:${old[k]}:${MINE[k]}`])) {
      const previous = this.cp.control.state;
      const rec = this.record("MIGRATING");
      rec.migration = { from: pick(old), to: pick(MINE), previous_version: this.version, previous_state: previous,
        changes: differing.map((k) => MIGRATIONS[`${k}:${old[k]}:${MINE[k]}`]),
        kept: ["approval binding (not refreshed)", "unresolved effects", "semantic keys", "cancellation"] };
      store.writeCheckpoint(this.version + 1, rec);
      this.version += 1;
      this.cp = rec;
      this.write(previous);
      return;
    }
    this.contract = old;            // the run stays under the old versions: its checkpoint says so
    const what = differing.map((k) => `${k} ${old[k]} -> ${MINE[k]}`).join(", ");
    store.release();                // the pinned worker takes the run at once
    await this.finish("PINNED", "platform", `no tested migration for ${what}: pinned to the old code`,
      { packet: { pinned_env: old, from: { ...MINE } } });
  }

  // Drive one effect to CONFIRMED; any other ending finishes the run and returns its name.
  async effect(e) {
    const prof = await this.describe(e.service);
    const base = { semantic_key: e.key, kind: "effect", service: e.service, operation: e.operation, run_id: RUN,
      intent: e.intent, intent_fingerprint: e.fingerprint, canonicalization_version: this.contract.canonicalization_version,
      knowledge: "PROPOSED",
      attempts: [], lease_epoch: EPOCH, proposal_hash: this.proposalHash, remote_ref: null, compensates: null };
    let cur = this.latest(e.key);
    if (!cur) {
      if (!e.notify) this.advance("PROPOSED");
      if (!e.notify && this.cancel) return this.finishNoEffect();
      if (!e.notify) await this.approved(e);
      cur = this.append(base, "PROPOSED", { note: "prepared before the first dispatch" });
    }
    if (cur.knowledge === "CONFIRMED") {
      // a confirmation recorded by an earlier worker is read back before it is replayed
      const v = await this.reconcile(e, prof, cur, true);
      if (v === "found" || v === "noread") return "CONFIRMED";
      return "STOPPED";
    }
    if (cur.knowledge === "REJECTED") return this.finishRun("FAILED_NO_EFFECT", null, "the service refused the request");
    this.advance(e.notify ? "NOTIFYING" : "EFFECT_PREPARED");

    for (;;) {
      cur = this.latest(e.key);
      if (cur.knowledge === "CONFIRMED") return "CONFIRMED";
      if (cur.knowledge === "SENT_UNKNOWN") {
        const v = await this.reconcile(e, prof, cur, false);
        if (v === "found") return "CONFIRMED";
        if (v === "stop") return "STOPPED";
        // "absent": authoritative absence, redispatch under the same key
      }
      await this.poll();
      if (this.cancel && !e.notify) return this.finishNoEffect();
      const deadline = this.intake.payload.deadline;
      if (typeof deadline === "number" && this.now() >= deadline) {
        // the absolute business deadline bounds retries as the attempt ceiling does
        return this.finishRun(e.notify ? "WAITING_OPERATOR" : "FAILED_NO_EFFECT", e.notify ? "operator" : null,
          "the business deadline passed before the next attempt; nothing sent took effect");
      }
      const attempts = (this.latest(e.key).attempts || []).length;
      if (attempts >= ATTEMPT_CEILING) {
        return this.finishRun("WAITING_RETRY", "operator", `attempt ceiling ${ATTEMPT_CEILING} spent, nothing sent took effect`);
      }
      // a retry-after recorded before a restart binds this worker too: wait out what is left of it
      const last = (this.latest(e.key).observations || []).slice(-1)[0];
      if (last && last.retry_after_ms && last.wall_ms) {
        const left = last.wall_ms + last.retry_after_ms - Date.now();
        if (left > 0) {
          log(`a recorded retry-after: ${left.toFixed(0)} ms left before attempt ${attempts + 1}`);
          await sleep(left);
          store.renew(this.ttlWall());
        }
      }
      if (!e.notify && MISTAKE !== "no_approval_check" && !(await this.authority(e)).live) {   // right before every send
        this.append(this.latest(e.key), "REJECTED", { evidence: [{ kind: "authority",
          note: "the approval is no longer live; nothing left the worker since the last authoritative absence" }] });
        return this.finishRun("FAILED_NO_EFFECT", "approver", "the approval is no longer live; nothing was sent");
      }
      const r = await this.send(e, prof);
      if (r === "sent-ok") return "CONFIRMED";
      if (r === "stop") return "STOPPED";
      // "retry" (definite refusal, backed off) or "ambiguous" (loop reconciles)
    }
  }

  // ---- compensation
  // Release the confirmed hold the cancellation no longer wants: a separate effect with its own key, proposal and
  // approval, prepared and recorded before it is sent, verified by a read of the original's key.
  async compensate() {
    const service = this.intake.payload.service;
    const ref = [...this.ledger].reverse().find((x) => x.semantic_key === this.key && x.remote_ref)?.remote_ref || null;
    const rel = { operation: "release", proposalHash: this.releaseHash };
    if (!this.latest(this.releaseKey)) {
      await this.releaseAuthorized(rel);
      this.append({ semantic_key: this.releaseKey, kind: "compensation", service, operation: "release", run_id: RUN,
        intent: this.releaseIntent, intent_fingerprint: sha(canon(this.releaseIntent)),
        canonicalization_version: this.contract.canonicalization_version, knowledge: "PROPOSED", attempts: [],
        lease_epoch: EPOCH, proposal_hash: this.releaseHash, remote_ref: null, compensates: this.key },
      "PROPOSED", { note: "the release, prepared" });
      this.append(this.latest(this.key), "COMPENSATION_PROPOSED", { note: `compensation ${this.releaseKey} proposed` });
    }
    if (!this.cp || this.cp.control.state !== "COMPENSATING") this.write("COMPENSATING");
    for (let i = 0; i < ATTEMPT_CEILING; i++) {
      const cur = this.latest(this.releaseKey);
      if (cur.knowledge === "PROPOSED") {
        if (MISTAKE !== "release_without_authority" && !(await this.authority(rel)).live) {   // right before the send
          return this.released("REJECTED", "the release's approval is no longer live; nothing was sent");
        }
        const attempts = [...(cur.attempts || []), { n: (cur.attempts || []).length + 1, at: this.now(), worker: WORKER, wall_ms: Date.now() }];
        this.append(cur, "SENT_UNKNOWN", { attempts, note: "about to send the release" });
        store.renew(this.ttlWall());
        const r = await request("POST", `/${service}/release`, { ref, retry_owner: "caller", proposal_hash: this.releaseHash },
          this.releaseKey, 5000);
        if (!r.closed && r.status < 500 && r.status !== 200 && r.status !== 429) {
          return this.released("REJECTED", `the release was refused: HTTP ${r.status}`);
        }
      }
      const verdict = await this.verifyRelease(service);
      if (verdict === "released") return this.released("CONFIRMED", "the original's record reads released");
      if (verdict === "held") {      // authoritatively not released: the release did not land
        this.append(this.latest(this.releaseKey), "PROPOSED", { reconciliation: [{ query: "lookup", found: true }],
          evidence: ["the original's record still reads active: the release did not land"] });
        continue;
      }
      return this.finish("CANCELLED_EFFECT_UNKNOWN", "operator", "the release's outcome is unknown: the original's record could not be read");
    }
    return this.released("REJECTED", "the release never landed within the attempt ceiling");
  }

  // An approval of the release's own (action release), asked for when there is none; denied: the run ends
  // (the finish throws) and the hold remains.
  async releaseAuthorized(rel) {
    if (MISTAKE === "release_without_authority") return;
    let answer = await this.authority(rel);
    for (let i = 0; i < 200 && !answer.live && String(answer.reason) !== "denied by policy"; i++) {
      await request("POST", "/authority/request", { proposal_hash: this.releaseHash, action: "release" }, null, 5000);
      await sleep(10);
      answer = await this.authority(rel);
    }
    if (answer.live) return;
    await this.finish("CANCELLED_EFFECT_REMAINS", "operator",
      `cancelled after the hold was confirmed; no authority to release it (${answer.reason}): it remains`);
  }

  // The original's record by its key: released, held, or unknown (every read failed).
  async verifyRelease(service) {
    for (let i = 0; i < 50; i++) {
      const r = await request("GET", `/${service}/lookup?key=${encodeURIComponent(this.key)}`, undefined, null, 5000);
      if (r.status === 200 && r.json && r.json.found && !r.json.in_flight && r.json.record) {
        return r.json.record.status === "released" ? "released" : "held";
      }
      await sleep(10);
    }
    return "unknown";
  }

  // The release settled: the compensation entry, then the original (COMPENSATED, or back to CONFIRMED when the
  // release certainly failed), then the run's disposition (the finish throws).
  async released(knowledge, why) {
    this.append(this.latest(this.releaseKey), knowledge, { evidence: [why] });
    if (knowledge === "CONFIRMED") {
      this.append(this.latest(this.key), "COMPENSATED", { evidence: [`released by ${this.releaseKey}`] });
      await this.finish("CANCELLED_NO_EFFECT", null, "cancelled; the hold was released and the release verified");
    }
    this.append(this.latest(this.key), "CONFIRMED", { evidence: [`the release ${this.releaseKey} failed: ${why}`] });
    await this.finish("CANCELLED_EFFECT_REMAINS", "operator", `cancelled; the hold remains (${why})`);
  }

  // ---- authority
  // The authority's answer for this proposal, or the release's (`e.proposalHash`; anything but a 200 is not live).
  async authority(e) {
    const query = `proposal_hash=${encodeURIComponent(e.proposalHash || this.proposalHash)}&action=${encodeURIComponent(e.operation)}`;
    const r = await request("GET", `/authority/check?${query}`, undefined, null, 5000);
    if (r.closed) return { live: false, reason: `no answer: ${r.detail}` };
    return r.status === 200 && r.json ? r.json : { live: false, reason: `HTTP ${r.status}` };
  }

  // A live approval bound to the proposal: APPROVED is written and the worker goes on. Otherwise the
  // run ends or waits durably (the finish throws): revoked or denied ends it with nothing sent; none
  // yet (or expired, or of an old capability version) asks for one and waits for it.
  async approved(e) {
    if (MISTAKE === "no_approval_check") return this.write("APPROVED");
    const answer = await this.authority(e);
    if (answer.live) return this.write("APPROVED");
    const reason = String(answer.reason);
    if (reason === "revoked" || reason === "denied by policy") {
      await this.finish("FAILED_NO_EFFECT", "approver", `no authority for the proposal (${reason}); nothing was sent`);
    }
    await request("POST", "/authority/request", { proposal_hash: this.proposalHash, action: e.operation }, null, 5000);
    await this.finish("WAITING_HUMAN", "approver", `waiting for an approval of the proposal (${reason})`);
  }

  finishNoEffect() { return this.finishRun("CANCELLED_NO_EFFECT", null, "cancelled before anything was sent"); }
  async finishRun(disposition, nextOwner, reason) { await this.finish(disposition, nextOwner, reason); return disposition; }

  async send(e, prof) {
    store.renew(this.ttlWall());     // confirm ownership right before the send
    const prev = this.latest(e.key);
    const attempt = { n: (prev.attempts || []).length + 1, at: this.now(), worker: WORKER, wall_ms: Date.now() };
    const attempts = [...(prev.attempts || []), attempt];
    if (MISTAKE !== "sent_unknown_after") this.append(prev, "SENT_UNKNOWN", { attempts });
    const path = e.service === "notification" ? "/notification/send" : `/${e.service}/${e.operation}`;
    // proposal_hash: the proposal this send carries out, the one the approval is bound to
    const body = { intent: e.intent, retry_owner: "caller", proposal_hash: this.proposalHash };
    if (prof.fencing) body.fence = EPOCH;
    const timeout = Math.max(2000, (prof.timeout_ms || 30) * 20);
    let r = await request("POST", path, body, e.key, timeout);
    if (MISTAKE === "blind_retry") {
      for (let i = 0; i < 2 && (r.closed || (r.status >= 500)); i++) r = await request("POST", path, body, e.key, timeout);
    }
    if (MISTAKE === "sent_unknown_after") this.append(prev, "SENT_UNKNOWN", { attempts });
    const err = r.json && r.json.error;
    if (r.status === 200 && r.json && e.service === "registry" && r.json.job_id) {
      // the publish was accepted as a job: the version exists only once the job ends well
      this.append(prev, "SENT_UNKNOWN", { attempts, observations: [{ attempt: attempt.n, outcome: "accepted",
        job_id: r.json.job_id, status: r.json.status, boundary: "answered", definite: true }] });
      return "ambiguous";
    }
    if (r.status === 200 && r.json) {
      this.seen(r.json.committed_at);
      const ref = r.json.ref || r.json.message_id || r.json.job_id || null;
      this.append(prev, "CONFIRMED", { attempts, remote_ref: ref,
        observations: [{ attempt: attempt.n, outcome: "ok", boundary: "answered", definite: true }],
        evidence: [{ kind: "response", attempt: attempt.n, ref }] });
      return "sent-ok";
    }
    const obs = { attempt: attempt.n, outcome: r.closed ? "closed" : (err ? err.code : `http ${r.status}`),
      status: r.status || null, definite: !!(err && err.definite), wall_ms: Date.now() };
    if (!err || !err.definite) {
      // a timeout, a closed connection or an indefinite 5xx: the effect may exist
      this.append(prev, "SENT_UNKNOWN", { attempts, observations: [{ ...obs, boundary: "after_send" }] });
      return "ambiguous";
    }
    const code = err.code;
    if (code === "throttled" || code === "unavailable") {
      const ra = Number(r.headers["retry-after-ms"] || (err.details && err.details.retry_after_ms) || 0) ||
        (code === "throttled" ? Number(r.headers["retry-after"] || 1) * 1000 / this.scale : 0);
      const wait = Math.max(ra, 10 * 2 ** (attempt.n - 1)) + Math.random() * 10;
      this.append(prev, "PROPOSED", { attempts, observations: [{ ...obs, boundary: "before_execution", retry_after_ms: ra }] });
      log(`${code}: backoff ${wait.toFixed(0)} ms before attempt ${attempt.n + 1}`);
      await sleep(wait);
      store.renew(this.ttlWall());
      return "retry";
    }
    if (code === "conflict_in_flight") {
      // this request did not execute, but one under the key is still executing: read it back
      this.append(prev, "SENT_UNKNOWN", { attempts, observations: [{ ...obs, boundary: "not_executed" }],
        note: "409: a request under this key is still executing" });
      return "ambiguous";
    }
    if (code === "intent_mismatch") {
      this.append(prev, "REJECTED", { attempts, observations: [obs], evidence: [{ kind: "refusal", code }] });
      await this.finish("WAITING_OPERATOR", "operator", "integrity error: the key is bound to another intent");
      return "stop";
    }
    // validation_failed, bad_request, permission_denied, already_exists, not_found, fenced: not retried
    this.append(prev, "REJECTED", { attempts, observations: [obs], evidence: [{ kind: "refusal", code }] });
    await this.finish(e.notify ? "FAILED_EFFECT_REMAINS" : "FAILED_NO_EFFECT", null, `refused: ${code}`);
    return "stop";
  }

  // Read the effect back. Returns "found", "absent" (authoritative: redispatch under the same key),
  // "noread" (the service has no identifying read) or "stop" (the run was finished here).
  async reconcile(e, prof, cur, verifyOnly) {
    const lookup = e.service === "notification" ? "none" : (prof.lookup || "none");
    const keyed = prof.idempotency === "semantic" || prof.idempotency === "key_only";
    const lastSend = [...(cur.attempts || [])].reverse().find((a) => a.wall_ms) || { wall_ms: Date.now() };
    const firstSend = (cur.attempts || []).find((a) => a.wall_ms) || lastSend;
    const bound = lastSend.wall_ms + (prof.max_delivery_delay_ms || 600) + (prof.timeout_ms || 30) + (prof.lag_ms || 0);
    if (lookup === "none") {
      if (verifyOnly) return "noread";
      const remains = this.cp && ["EFFECT_CONFIRMED", "NOTIFYING"].includes(this.cp.control.state);
      if (e.notify) {
        await this.finish("WAITING_OPERATOR", "operator", "DELIVERY_UNKNOWN: the notification's answer was never seen and the service has no read");
      } else if (this.cancel) {
        await this.finish("CANCELLED_EFFECT_UNKNOWN", "operator", "no identifying read: the effect stays unknown");
      } else {
        await this.finish(remains ? "WAITING_OPERATOR" : "FAILED_EFFECT_UNKNOWN", "operator",
          "the service offers no identifying read: the effect stays unknown, escalated");
      }
      return "stop";
    }
    const giveUp = bound + 2 * (prof.max_delivery_delay_ms || 600) + (prof.job_ms || 0);
    const jobObs = [...(cur.observations || [])].reverse().find((o) => o.job_id);
    for (let reads = 1; ; reads++) {
      let path;
      if (e.service === "registry" && jobObs && !verifyOnly) {
        // keep the job id the publish returned and follow that job; never publish again to find out
        path = `/registry/wait_job?job_id=${encodeURIComponent(jobObs.job_id)}&wait_ms=${Math.round(10 * this.scale)}`;
      } else if (e.service === "registry") {
        path = `/registry/get_version?package=${encodeURIComponent(e.intent.package)}&version=${encodeURIComponent(e.intent.version)}`;
      } else {
        path = lookup === "by_key" ? `/${e.service}/lookup?key=${encodeURIComponent(e.key)}`
          : `/${e.service}/search?incident=${encodeURIComponent(e.intent.incident)}&slot=${encodeURIComponent(e.intent.slot)}`;
      }
      const r = await request("GET", path, undefined, null, 5000);
      const at = this.now();
      if (r.status === 200 && r.json) {
        this.seen(r.json.as_of);
        let rec = null;
        let conflict = false;
        let running = false;
        if (e.service === "registry") {
          // wait_job answers {status, record}; get_version {found, record, in_flight}
          const record = r.json.record || null;
          if (record && (r.json.found !== false)) {
            if (sameIntent(record.intent, e.intent)) rec = record; else conflict = true;
          }
          running = "status" in r.json ? r.json.status === "running" : !!r.json.in_flight;
          if (r.json.status === "failed" || (rec && rec.status === "failed")) {
            this.append(cur, cur.knowledge, { reconciliation: [{ query: path, at, status: r.json.status }] });
            await this.finish("WAITING_OPERATOR", "operator", "the publish job failed: what remains needs a decision");
          }
          if (conflict && r.json.found) {
            // a natural key held by another intent: this run's publish is absent, and cannot be made
            conflict = false;
          }
        } else if (lookup === "by_key") {
          if (r.json.found && r.json.record) {
            if (sameIntent(r.json.record.intent, e.intent)) rec = r.json.record; else conflict = true;
          }
        } else {
          const matches = (r.json.records || []).filter((x) => sameIntent(x.intent, e.intent));
          if (matches.length) rec = matches[0];
        }
        const q1 = e.service === "registry" ? `registry.${path.slice(10, path.indexOf("?"))}`
          : lookup === "by_key" ? `${e.service}.lookup(key)` : `${e.service}.search(incident, slot)`;
        const read = { query: q1, at, found: !!rec, ref: rec ? rec.ref : null, as_of: r.json.as_of,
          consistency: r.json.consistency, in_flight: !!r.json.in_flight };
        if (conflict) {
          this.append(cur, cur.knowledge, { reconciliation: [read], note: "integrity error: the key holds other parameters" });
          await this.finish(this.cancel ? "CANCELLED_EFFECT_UNKNOWN" : "WAITING_OPERATOR", "operator", "integrity error: key bound to other parameters");
          return "stop";
        }
        if (rec && running) {
          rec = null;     // the version is being published: follow the job until it ends
        } else if (rec) {
          if (rec.status === "released") {
            await this.finish("WAITING_OPERATOR", "operator", "contradictory evidence: the recorded hold reads released");
            return "stop";
          }
          if (!verifyOnly || this.latest(e.key).remote_ref !== rec.ref) {
            this.append(cur, "CONFIRMED", { remote_ref: rec.ref || null, reconciliation: [read],
              evidence: [{ kind: "read", query: q1, at, ref: rec.ref || null }] });
          }
          return "found";
        }
        if (!rec && !verifyOnly && prof.retention_ms && Date.now() >= firstSend.wall_ms + prof.retention_ms) {
          // the provider forgot the key: a negative read proves nothing and a resend would run again
          this.append(cur, cur.knowledge, { reconciliation: [read], note: "key retention passed: absence is not authoritative" });
          await this.finish(this.cancel ? "CANCELLED_EFFECT_UNKNOWN" : "FAILED_EFFECT_UNKNOWN", "operator",
            "the provider's key retention passed since the first send: the effect stays unknown, escalated");
          return "stop";
        }
        if (verifyOnly) {
          await this.finish("WAITING_OPERATOR", "operator", "contradictory evidence: a recorded confirmation reads absent");
          return "stop";
        }
        // absent: authoritative only when nothing is in flight, the read is fresh and (without
        // keys to collapse a late arrival) the provider's late-delivery bound has passed
        // an eventual read shows the state lag_ms ago: it proves absence only once that moment is
        // past the end of the last attempt (with a margin for the scaled clock)
        const ended = Math.max(lastSend.wall_ms + (prof.timeout_ms || 30),
          ...(cur.observations || []).map((o) => o.wall_ms || 0));
        const margin = (prof.timeout_ms || 30) + 0.1 * (prof.lag_ms || 0);
        const fresh = r.json.consistency !== "eventual" || Date.now() - (prof.lag_ms || 0) >= ended + margin;
        if (!r.json.in_flight && !running && fresh && (keyed || Date.now() >= bound)) {
          this.append(cur, "PROPOSED", { reconciliation: [read], evidence: [{ kind: "read", query: q1, at, found: false }],
            note: "authoritative absence: redispatch under the same key" });
          return "absent";
        }
      }
      if (reads >= 200 || Date.now() > giveUp) break;
      await sleep(Math.max(10, Math.min(200, (prof.max_delivery_delay_ms || 600) / 10)));
      store.renew(this.ttlWall());
    }
    await this.finish(this.cancel ? "CANCELLED_EFFECT_UNKNOWN" : "FAILED_EFFECT_UNKNOWN", "operator",
      "the authoritative read stayed unavailable: the effect stays unknown, escalated");
    return "stop";
  }
}

async function main() {
  if (!URL_BASE || !DB || (MISTAKE && !MISTAKES.includes(MISTAKE))) {
    if (MISTAKE && !MISTAKES.includes(MISTAKE)) process.stderr.write(`unknown --mistake=${MISTAKE}\n`);
    process.stderr.write(`usage: node worker.js URL DB [--mistake=${MISTAKES.join("|")}]\n`);
    process.exit(2);
  }
  const w = new Worker();
  try {
    await w.main();
    process.exit(0);
  } catch (err) {
    if (err instanceof Done) process.exit(0);
    if (err instanceof Stop) { log(`stopping: ${err.message}`); process.exit(0); }
    log(`error: ${err && err.stack}`);
    process.exit(1);
  }
}

main();
