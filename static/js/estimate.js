// When a run should end, from the measured attempt rate and what is left (pure: no DOM, no clock of its own).
//
// The time per attempt: the finished attempts' mean, the reference's evaluation counted as one of them, raised by
// how far each attempt in flight has run past it (its overshoot over the attempts counted): an attempt that runs
// long raises the figure second by second, so the estimate never freezes while work proceeds; one that finishes
// moves the mean by (its time − the mean) / (finished + 1), never more than that evidence says. What is left: the
// attempts still to start, each that time, plus what each attempt in flight still needs of it, over the attempts
// that run at once. With few attempts finished the figure is unsure by about 1/sqrt(finished + 1): the estimate
// is then a range. The cases in tests/web/estimate_cases.json hold this arithmetic
// (tests/web/test_steered_run_browser.py runs them here).

export const RANGE_ABOVE = 0.2; // show a range while the relative uncertainty is above this

// input: {now, budget, used, parallel, attempts: [{created_at, finished_at|null}] (counted attempts only),
// reference_s: the reference's evaluation in seconds or null}. Returns null when the budget is unknown,
// {seconds: null} while nothing is measured yet, else {seconds, low, high, range, per, left, slots, finished, late}
// (late: nothing left to start and every attempt in flight is past the time per attempt).
export function endEstimate({ now, budget, used, parallel = 1, attempts = [], reference_s = null }) {
  if (budget == null) return null;
  const finished = attempts.filter((a) => a.finished_at != null && a.created_at != null);
  const flying = attempts.filter((a) => a.finished_at == null && a.created_at != null);
  const prior = reference_s != null && reference_s > 0 ? 1 : 0;
  const count = finished.length + prior;
  if (count === 0) return { seconds: null };
  const base = (finished.reduce((t, a) => t + Math.max(0, a.finished_at - a.created_at), 0)
    + (prior ? reference_s : 0)) / count;
  const overshoot = flying.reduce((t, a) => t + Math.max(0, now - a.created_at - base), 0);
  const per = base + overshoot / count;
  const late = flying.length > 0 && flying.every((a) => now - a.created_at >= per);
  const left = Math.max(0, budget - (used ?? attempts.length));
  const slots = Math.max(1, Math.min(parallel || 1, left + flying.length));
  const work = (p) => left * p + flying.reduce((s, a) => s + Math.max(0, p - (now - a.created_at)), 0);
  const u = 1 / Math.sqrt(count);
  const seconds = Math.round(work(per) / slots);
  const low = Math.round(work(per / (1 + u)) / slots);
  const high = Math.round(work(per * (1 + u)) / slots);
  return { seconds, low, high, range: u > RANGE_ABOVE && high > low, per, left, slots, finished: finished.length,
           late: late && left === 0 };
}
