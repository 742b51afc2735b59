// Human steering from the node inspector: the forms and buttons of templates/pages/_steer.html post to
// POST /api/runs/<id>/steer; the action's events come back over the run's socket and redraw the inspector.

function csrf() {
  const m = document.cookie.match(/csrftoken=([^;]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

function lines(text) {
  return text.split("\n").map((t) => t.trim()).filter(Boolean);
}

async function send(box, body) {
  const error = box.querySelector(".steer-error");
  error.textContent = "";
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

export function enableSteering(root) {
  root.addEventListener("submit", async (e) => {
    const form = e.target.closest("form[data-steer]");
    const box = form?.closest(".steer");
    if (!form || !box) return;
    e.preventDefault();
    if (await send(box, formBody(form, box)) && form.dataset.steer === "hint") form.reset();
  });
  root.addEventListener("click", async (e) => {
    const button = e.target.closest("[data-steer-action]");
    const box = button?.closest(".steer");
    if (!button || !box) return;
    e.preventDefault();
    await send(box, { action: button.dataset.steerAction, node: Number(box.dataset.node) });
  });
}
