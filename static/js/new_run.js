// New-run page: read an uploaded file into the editor (so it is validated like pasted code) after checking its
// size and that it is text, clear the upload when an example is chosen, show how long a check has run (and when it
// gives up), show the server's 413/400 answers in the check panel, and grey out the LLM settings for the offline
// team.

const form = document.getElementById("new-run-form");
const fileInput = document.getElementById("id_problem");
const team = document.getElementById("id_team");
const llm = document.getElementById("llm-settings");
const device = document.getElementById("id_device");

function validateNow() {
  const source = document.getElementById("id_problem_source");
  if (source && window.htmx) window.htmx.trigger(source, "validate");
}

const maxBytes = Number(form?.dataset.maxBytes || 0);
const checkTimeout = Number(form?.dataset.checkTimeout || 0);
let fileProblem = "";

function kb(n) {
  return n >= 1048576 ? `${(n / 1048576).toFixed(1)} MB` : `${Math.round(n / 1024)} KB`;
}

// A refusal in the check panel, in the same shape as the server's (templates/pages/_validation.html).
function showProblem(kind, title, text) {
  const box = document.createElement("div");
  box.className = "bad";
  box.id = "problem-error";
  box.dataset.kind = kind;
  box.setAttribute("role", "alert");
  const b = document.createElement("b");
  b.textContent = title;
  const p = document.createElement("p");
  p.style.margin = "6px 0 0";
  p.textContent = text;
  box.append(b, p);
  document.getElementById("validation").replaceChildren(box);
}

// Size first (without reading it), then text: a binary file is named as such, never dumped into the editor.
async function fileRefusal(file) {
  if (maxBytes && file.size > maxBytes) {
    return ["too-big", "Not checked: the file is too large.",
      `${file.name} is ${kb(file.size)}; problems are limited to ${kb(maxBytes)} (STARK_MAX_UPLOAD_BYTES). `
      + "Upload the problem's .py source file only."];
  }
  const bytes = new Uint8Array(await file.arrayBuffer());
  let text = null;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    text = null;
  }
  if (text == null || text.includes("\u0000")) {
    return ["binary", "Not checked: this is not a Python source file.",
      `${file.name} is a binary file, not Python source text; upload the problem's .py file (a KernelBench-format `
      + "module with Model, get_inputs and get_init_inputs)."];
  }
  return text;
}

fileInput?.addEventListener("change", async () => {
  const file = fileInput.files[0];
  const note = document.getElementById("file-note");
  fileProblem = "";
  if (!file) return;
  const answer = await fileRefusal(file);
  if (Array.isArray(answer)) {
    fileProblem = answer[2];
    showProblem(...answer);
    if (note) { note.hidden = false; note.textContent = `${file.name} was not loaded; the editor keeps its text.`; }
    return;
  }
  document.getElementById("id_problem_source").value = answer;
  document.getElementById("id_problem_name").value = file.name;
  document.getElementById("chosen-example")?.remove();
  if (note) { note.hidden = false; note.textContent = `${file.name} loaded into the editor below.`; }
  validateNow();
});

// A refused file is never sent (the server would refuse it too, after the upload).
form?.addEventListener("submit", (e) => {
  if (fileProblem) {
    e.preventDefault();
    showProblem("refused", "Not started: fix the problem file first.", fileProblem);
  }
});

// The server's refusals (413 too large, 400 unreadable) are shown in the check panel, not dropped.
document.body.addEventListener("htmx:beforeSwap", (e) => {
  if (e.detail.target?.id === "validation" && [400, 413, 429, 503].includes(e.detail.xhr.status)) {
    e.detail.shouldSwap = true;
    e.detail.isError = false;
  }
});

// "checking… 4 s (gives up within 40 s)" while a check runs: the whole check's bound (STARK_CHECK_TIMEOUT_S plus half
// of it, 3 to 10 s: stark_web/studio/service/checks.py deadline_s).
const indicator = document.getElementById("validating");
let ticking = null;
document.body.addEventListener("htmx:beforeRequest", (e) => {
  if (e.detail.target?.id !== "validation" || !indicator) return;
  const started = Date.now();
  clearInterval(ticking);
  const draw = () => {
    const s = Math.round((Date.now() - started) / 1000);
    indicator.textContent = `checking… ${s} s${checkTimeout ? ` (gives up within ${checkTimeout} s)` : ""}`;
  };
  draw();
  ticking = setInterval(draw, 1000);
});
document.body.addEventListener("htmx:afterRequest", (e) => {
  if (e.detail.target?.id === "validation") clearInterval(ticking);
});

// Choosing an example replaces an earlier upload (the server prefers a file when one is sent).
form?.addEventListener("click", (e) => {
  if (e.target.closest("button.example") && fileInput) fileInput.value = "";
});

// Typing into the editor after an upload: the text, not the file, is what the user means.
form?.addEventListener("input", (e) => {
  if (e.target.id === "id_problem_source" && fileInput) {
    fileInput.value = "";
    fileProblem = "";
    const note = document.getElementById("file-note");
    if (note) note.hidden = true; // what the editor holds now is the user's text, not a file
  }
});

function syncTeam() {
  if (!team || !llm) return;
  const help = document.getElementById("team-help");
  if (help) help.textContent = team.selectedOptions[0]?.textContent || ""; // the whole description, never cut
  const offline = team.value === "rules";
  llm.disabled = offline;
  llm.classList.toggle("muted", offline);
}
team?.addEventListener("change", syncTeam);
device?.addEventListener("change", validateNow);
syncTeam();

// A folded section with a field the server refused opens, so the message is seen.
for (const box of form?.querySelectorAll("details") || []) {
  if (box.querySelector(".errorlist")) box.open = true;
}
