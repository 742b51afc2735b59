// The client's copy of one run: nodes by id and the last applied event seq (CONTRACTS §3).
// Pure data, no DOM: the run page and the tree benchmark both feed it snapshots and events.

import { endEstimate } from "./estimate.js";
import { FREE_VERDICTS, phaseWords, rootOf, speedOf } from "./speed.js";

const FINISHED = new Set(["done", "failed"]);

export function isFinished(node) {
  return FINISHED.has(node.status);
}

export function isPass(node) {
  return node.verdict === "pass" && node.runtime_ms != null;
}

// "build 14 s": the evaluation's phase and how long it has run (node.phase: `eval_phase_s`, sent every 2 s).
export function phaseClock(n) {
  if (!n.eval_phase) return "";
  const s = Math.round(n.eval_phase_s ?? n.eval_elapsed_s ?? 0);
  return `${phaseWords(n.eval_phase)} ${s} s`;
}

// A phase timer never goes back within the same phase of the same evaluation: a late or repeated message (they are
// unsequenced) keeps the larger clock; a new evaluation (its total elapsed went back) starts afresh.
export function monotonicPhase(node, changes) {
  const same = changes.eval_phase != null && changes.eval_phase === node.eval_phase;
  const sameRun = (changes.eval_elapsed_s ?? Infinity) >= (node.eval_elapsed_s ?? 0);
  if (!same || !sameRun || changes.eval_phase_s == null || node.eval_phase_s == null) return changes;
  return { ...changes, eval_phase_s: Math.max(changes.eval_phase_s, node.eval_phase_s) };
}

export class RunState {
  constructor() {
    this.run = {};
    this.nodes = new Map();
    this.seq = 0;
    this.leaderboard = [];
    this.streams = new Map(); // node id -> text streamed since the last snapshot
    this.listeners = new Set();
    this.synced = false; // true once a snapshot arrived: before it, what the server rendered stands
  }

  // fn(kind, payload): kind is "snapshot", "node", "phase", "run", "leaderboard" or "stream".
  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  notify(kind, payload) {
    for (const fn of this.listeners) fn(kind, payload);
  }

  applySnapshot(msg) {
    this.run = msg.run || {};
    this.synced = true;
    this.seq = msg.seq || 0;
    this.nodes = new Map();
    for (const n of msg.nodes || []) this.nodes.set(n.id, { ...n });
    if (Array.isArray(this.run.leaderboard)) this.leaderboard = this.run.leaderboard;
    this.notify("snapshot", this);
  }

  // Returns "applied", "duplicate" or "gap" (the caller then asks the server to resync).
  applyEvent(ev) {
    if (typeof ev.seq === "number") {
      if (ev.seq <= this.seq) return "duplicate";
      if (ev.seq > this.seq + 1) return "gap";
      this.seq = ev.seq;
    }
    this.applyChange(ev);
    return "applied";
  }

  applyChange(ev) {
    const data = ev.data || {};
    const node = ev.node != null ? this.nodes.get(ev.node) : undefined;
    switch (ev.type) {
      case "node.created": {
        const created = { ...data, id: data.id ?? ev.node };
        this.nodes.set(created.id, created);
        this.notify("node", created);
        break;
      }
      case "node.stream": {
        const text = (this.streams.get(ev.node) || "") + (data.text || "");
        this.streams.set(ev.node, text);
        this.notify("stream", { id: ev.node, role: data.role, text: data.text || "", all: text });
        break;
      }
      case "run.status":
      case "run.progress":
      case "run.settings": {
        const { run, ...rest } = data;
        if (run && typeof run === "object") Object.assign(this.run, run);
        Object.assign(this.run, rest);
        this.notify("run", this.run);
        break;
      }
      case "node.phase": // unsequenced: what an evaluation or re-time in flight is doing now
        if (node && data.changes) {
          Object.assign(node, monotonicPhase(node, data.changes));
          this.notify("phase", node);
        }
        break;
      case "leaderboard":
        this.leaderboard = data.nodes || [];
        this.notify("leaderboard", this.leaderboard);
        break;
      default:
        // node.status, node.result, node.speed (another node's stored figure changed), agent.call...: the
        // service sends the node fields that changed.
        if (node && data.changes) {
          Object.assign(node, data.changes);
          this.notify("node", node);
          if (ev.type === "node.speed") this.notify("speed", node); // the run's verdict was recomputed too
        } else if (node && (ev.type === "node.status" || ev.type === "node.result")) {
          Object.assign(node, data);
          this.notify("node", node);
        }
        break;
    }
  }

  children(id) {
    const out = [];
    for (const n of this.nodes.values()) if (n.parent === id) out.push(n);
    return out;
  }

  // Correct nodes other than the root with a stored figure, fastest by that figure first (the search's runtime
  // breaks ties, then the id); correct nodes without a figure after them.
  // The run's verdict orders them (run.verdict.order, search.engine.verdict.ordered: its best first, then by
  // figure, ties marked); attempts it does not list yet (a figure landed since) follow by the same rule.
  ranked() {
    const value = (n) => speedOf(n)?.value ?? -Infinity;
    const order = new Map((this.verdict().order || []).map((e, i) => [e.id, i]));
    const pos = (n) => (order.has(n.id) ? order.get(n.id) : Infinity);
    return [...this.nodes.values()]
      .filter((n) => isPass(n) && n.parent != null)
      .sort((a, b) => pos(a) - pos(b) || value(b) - value(a) || a.runtime_ms - b.runtime_ms || a.id - b.id);
  }

  // The verdict's entry for a node ({id, rank, tie_with}), or null.
  rankOf(id) {
    return (this.verdict().order || []).find((e) => e.id === id) || null;
  }

  // The contenders of a settling run whose re-time is not in yet: [{node, state}] (header: what is pending).
  pending() {
    const out = [];
    for (const id of this.run?.contenders || []) {
      const r = this.nodes.get(id)?.result?.retime;
      const state = r?.state || "queued";
      if (state !== "done" && state !== "failed") out.push({ node: id, state });
    }
    return out;
  }

  root() {
    return rootOf(this.nodes);
  }

  // The node's stored figure (search.engine.verdict on the server): nothing is computed here.
  speedOf(n) {
    return speedOf(n);
  }

  // The run's verdict as the server stored it ({} before the first one).
  verdict() {
    return (this.run && this.run.verdict) || {};
  }

  // Figures for the header. Attempts count as the server counts them (search.engine.tree attempts): every node
  // but the root and the declined ones (free: a team with nothing left to try). "In flight" counts the reference
  // while it is evaluated (it is work in progress like any attempt).
  totals() {
    const free = {};
    let attempts = 0, declined = 0, inFlight = 0, passed = 0, failed = 0, tokensIn = 0, tokensOut = 0, cost = 0;
    for (const n of this.nodes.values()) {
      const u = n.usage || {};
      tokensIn += u.input_tokens || 0;
      tokensOut += u.output_tokens || 0;
      cost += u.cost_usd || 0;
      if (n.parent == null) {
        if (!isFinished(n) && n.status !== "pending") inFlight += 1;
        continue;
      }
      if (FREE_VERDICTS.includes(n.verdict)) {
        declined += 1;
        free[n.verdict] = (free[n.verdict] || 0) + 1;
        continue;
      }
      attempts += 1;
      if (!isFinished(n)) inFlight += 1;
      else if (isPass(n)) passed += 1;
      else failed += 1;
    }
    return { attempts, declined, free, inFlight, passed, failed, tokensIn, tokensOut, cost, best: this.best() };
  }

  // The run's best attempt as its verdict names it (run.verdict.best: the contender fastest side by side once
  // re-timed, else the fastest correct attempt), else the first of ranked().
  best() {
    const v = this.verdict();
    const id = v.best ?? this.run?.best;
    const named = id != null ? this.nodes.get(id) : null;
    if (named && named.parent != null && isPass(named)) return named;
    return this.ranked()[0] || null;
  }

  // What the run's answer is: "attempt", "reference" (finished, no attempt faster), "untrusted" (the best runs
  // beyond its roofline and no re-time cleared it) or null (not decided yet), with the server's why.
  winner() {
    const v = this.verdict();
    const status = this.run?.status;
    const finished = status === "finished";
    const kind = status === "settling" ? null : v.kind === "attempt" ? "attempt"
      : finished && ["reference", "untrusted"].includes(v.kind) ? v.kind : null;
    return { kind, why: v.why || "" };
  }

  // When the run should end (static/js/estimate.js endEstimate: the measured attempt rate and what is left; a
  // range while few attempts finished). null once the run ended; {seconds: null, text} while nothing is known.
  estimate(now = Date.now() / 1000) {
    const run = this.run;
    if (!["queued", "running"].includes(run.status) || run.budget == null) return null;
    const counted = [...this.nodes.values()].filter((n) => n.parent != null && !FREE_VERDICTS.includes(n.verdict));
    const attempts = counted.map((n) => ({ created_at: n.created_at, finished_at: isFinished(n) ? n.finished_at ?? now : null }));
    const root = this.root();
    const reference_s = root && isFinished(root) && root.created_at && root.finished_at
      ? Math.max(1, root.finished_at - (run.started_at || root.created_at)) : null;
    const used = typeof run.attempts === "number" ? run.attempts : counted.length;
    const e = endEstimate({ now, budget: run.budget, used, parallel: run.parallel || 1, attempts, reference_s });
    if (!e || e.seconds == null) return { seconds: null, text: "estimate once the reference is timed" };
    const basis = e.finished ? `${e.finished} finished attempt${e.finished === 1 ? "" : "s"}${reference_s != null ? " and the reference" : ""}`
      : "the reference's evaluation (an attempt also builds its kernel: likely longer)";
    if (e.late) {
      return { ...e, text: `finishing: the attempt${counted.filter((n) => !isFinished(n)).length === 1 ? "" : "s"} in flight `
        + `run past the usual ~${duration(Math.round(e.per))} (measured over ${e.finished} finished attempts)` };
    }
    const head = e.range ? `≈ ${duration(e.low)}–${duration(e.high)} left` : `≈ ${duration(e.seconds)} left`;
    return { ...e, text: `${head} · ${e.left} attempt${e.left === 1 ? "" : "s"} to start × ~${duration(Math.round(e.per))} `
      + `(measured over ${basis})${e.slots > 1 ? ` ÷ ${e.slots} at once` : ""}` };
  }

  // Best stored figure after each finished attempt, in attempt order (the best-so-far chart).
  bestSoFar() {
    const done = [...this.nodes.values()]
      .filter((n) => n.parent != null && isFinished(n) && !FREE_VERDICTS.includes(n.verdict))
      .sort((a, b) => a.attempt - b.attempt || a.id - b.id);
    const points = [];
    let best = null;
    for (const n of done) {
      const value = isPass(n) ? speedOf(n)?.value ?? null : null;
      if (value != null && (best == null || value > best)) best = value;
      points.push({ attempt: n.attempt, id: n.id, best, value });
    }
    return points;
  }
}

export function duration(s) {
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  if (s >= 60) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${s} s`;
}
