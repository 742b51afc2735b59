// Human steering from the node inspector: the forms and buttons of templates/pages/_steer.html post to
// POST /api/runs/<id>/steer; a stored action is confirmed where it was made (a line that outlives the pane's reload),
// and the reloaded inspector lists it with who and when.

function csrf() {
  const m = document.cookie.match(/csrftoken=([^;]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

function lines(text) {
  return text.split("\n").map((t) => t.trim()).filter(Boolean);
}

// What each action did, in the words the confirmation shows where it was made.
const DONE = {
  pin: (n) => `Saved: #${n} is expanded next, before the search's own choice.`,
  unpin: (n) => `Saved: #${n} is no longer expanded next.`,
  prune: (n) => `Saved: #${n} and its subtree are never selected again.`,
  unprune: (n) => `Saved: #${n} and its subtree can be selected again.`,
  hint: (n) => (n == null ? "Saved: every next plan of the run receives your hint." : `Saved: the next plans from #${n} and its subtree receive your hint.`),
  try: (n) => `Saved: your plan for #${n} is coded next, as a new attempt.`,
  approve: (n) => `Saved: the plan of #${n} is approved and goes to the code agent.`,
  edit: (n) => `Saved: your edits to the plan of #${n} are coded.`,
  reject: (n) => `Saved: the plan of #${n} is rejected; the attempt is not counted.`,
};
let confirmation = null; // {run, node, text}: shown again after the inspector reloads

export function showConfirmation(root) {
  const box = root.querySelector(".steer");
  const line = root.querySelector("#steer-confirm");
  if (!box || !line || !confirmation) return;
  const here = confirmation.run === box.dataset.run && confirmation.node === box.dataset.node;
  line.textContent = here ? confirmation.text : "";
}

async function send(box, body) {
  const error = box.querySelector(".steer-error");
  error.textContent = "";
  const line = box.querySelector("#steer-confirm");
  if (line) line.textContent = "";
  const answer = await fetch(`/api/runs/${box.dataset.run}/steer`, {
    method: "POST", credentials: "same-origin", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrf(), Accept: "application/json" },
  });
  if (!answer.ok) {
    let message = `${answer.status} ${answer.statusText}`;
    try { message = (await answer.json()).error || message; } catch { /* not JSON */ }
    error.textContent = message;
    return false;
  }
  const node = body.node ?? null;
  const text = (DONE[body.action] || (() => "Saved."))(node);
  confirmation = { run: box.dataset.run, node: box.dataset.node, text };
  if (line) line.textContent = text;
  return true;
}

function formBody(form, box) {
  const kind = form.dataset.steer;
  const node = Number(box.dataset.node);
  if (kind === "hint") {
    const text = form.querySelector("[name=text]").value;
    return form.querySelector("[name=run_wide]")?.checked ? { action: "hint", text } : { action: "hint", node, text };
  }
  if (kind === "try") {
    return { action: "try", node, anchored_source: form.querySelector("[name=anchored_source]").value,
             instructions: lines(form.querySelector("[name=instructions]").value) };
  }
  // edit: every instruction box in order, and the skeleton when it was changed
  const body = { action: "edit", node, instructions: [...form.querySelectorAll("[name=instructions]")].map((t) => t.value) };
  const skeleton = form.querySelector("[name=anchored_source]");
  if (skeleton && skeleton.value !== skeleton.defaultValue) body.anchored_source = skeleton.value;
  return body;
}

// onDone(): after an action was stored (the run page reloads the inspector: the action's list shows it).
export function enableSteering(root, onDone = () => {}) {
  root.addEventListener("submit", async (e) => {
    const form = e.target.closest("form[data-steer]");
    const box = form?.closest(".steer");
    if (!form || !box) return;
    e.preventDefault();
    if (await send(box, formBody(form, box))) {
      if (form.dataset.steer === "hint") form.reset();
      onDone();
    }
  });
  root.addEventListener("click", async (e) => {
    const button = e.target.closest("[data-steer-action]");
    const box = button?.closest(".steer");
    if (!button || !box) return;
    e.preventDefault();
    if (await send(box, { action: button.dataset.steerAction, node: Number(box.dataset.node) })) onDone();
  });
}
