// New-run page: read an uploaded file into the editor (so it is validated like pasted code), clear the
// upload when an example is chosen, and grey out the LLM settings for the offline team.

const form = document.getElementById("new-run-form");
const fileInput = document.getElementById("id_problem");
const team = document.getElementById("id_team");
const llm = document.getElementById("llm-settings");
const device = document.getElementById("id_device");

function validateNow() {
  const source = document.getElementById("id_problem_source");
  if (source && window.htmx) window.htmx.trigger(source, "validate");
}

fileInput?.addEventListener("change", async () => {
  const file = fileInput.files[0];
  if (!file) return;
  document.getElementById("id_problem_source").value = await file.text();
  document.getElementById("id_problem_name").value = file.name;
  document.getElementById("chosen-example")?.remove();
  validateNow();
});

// Choosing an example replaces an earlier upload (the server prefers a file when one is sent).
form?.addEventListener("click", (e) => {
  if (e.target.closest("button.example") && fileInput) fileInput.value = "";
});

// Typing into the editor after an upload: the text, not the file, is what the user means.
form?.addEventListener("input", (e) => {
  if (e.target.id === "id_problem_source" && fileInput) fileInput.value = "";
});

function syncTeam() {
  if (!team || !llm) return;
  const offline = team.value === "rules";
  llm.disabled = offline;
  llm.classList.toggle("muted", offline);
}
team?.addEventListener("change", syncTeam);
device?.addEventListener("change", validateNow);
syncTeam();
