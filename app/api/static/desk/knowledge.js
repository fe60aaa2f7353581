// The desk's Knowledge view: search the tenant's documents as the bot would, add one (a file, or
// Markdown pasted in), delete one. Loaded after desk.js, whose sign-in, `api`, `el` and CSRF
// token it uses; an upload is the one request that is not JSON (a multipart form).
"use strict";

const KB = "/v1/knowledge";
let kbCursor = null; // the next page of documents, when there is one
let kbLastQuery = null; // what the results show, asked again after a change

function showView(name) {
  const knowledge = name === "knowledge";
  $("desk").hidden = knowledge;
  $("knowledge").hidden = !knowledge;
  $("show-desk").setAttribute("aria-pressed", String(!knowledge));
  $("show-knowledge").setAttribute("aria-pressed", String(knowledge));
  if (knowledge) {
    const writer = me && (me.role === "operator" || me.role === "admin");
    $("kb-add").hidden = !writer; // agents read and search; writing needs the operator role
    loadDocuments(false);
  }
}

$("show-desk").addEventListener("click", () => showView("desk"));
$("show-knowledge").addEventListener("click", () => showView("knowledge"));

// -- search ----------------------------------------------------------------------------------------

async function runSearch(query) {
  kbLastQuery = query;
  const params = new URLSearchParams({ q: query.q });
  if (query.language) params.set("language", query.language);
  $("kb-search-note").textContent = "searching…";
  try {
    const { items } = await api("GET", `${KB}/search?${params}`);
    $("kb-search-note").textContent = items.length
      ? passageCount(items.length)
      : "nothing in the knowledge base answers this well enough";
    $("kb-results").replaceChildren(...items.map((hit) => el(
      "li", { class: "kb-hit", "data-document": hit.document_id, "data-chunk": hit.chunk_id },
      el("div", {}, el("b", { class: "title" }, hit.title), el("span", { class: "score" }, hit.score.toFixed(2))),
      el("span", { class: "section" }, hit.section || "(before any heading)"),
      el("span", { class: "snippet" }, hit.snippet),
    )));
  } catch (error) {
    $("kb-search-note").textContent = error.message;
    $("kb-results").replaceChildren();
  }
}

$("kb-search").addEventListener("submit", (event) => {
  event.preventDefault();
  const q = $("kb-q").value.trim();
  if (q) runSearch({ q, language: $("kb-language").value });
});

// -- the documents -----------------------------------------------------------------------------------

function passageCount(n) {
  return `${n} passage${n === 1 ? "" : "s"}`;
}

function documentItem(d) {
  const meta = [d.format, d.language, `v${d.version}`, passageCount(d.chunk_count)];
  if (d.tags.length) meta.push(d.tags.join(", "));
  if (d.trusted) meta.push("trusted");
  if (d.valid_until) meta.push(`until ${d.valid_until.slice(0, 10)}`);
  const writer = me && (me.role === "operator" || me.role === "admin");
  const remove = writer ? el("button", { type: "button", class: "delete", textContent: "Delete" }) : null;
  if (remove) remove.addEventListener("click", () => deleteDocument(d, remove));
  return el(
    "li", { class: "kb-doc", "data-document": d.id },
    el("div", {}, el("b", { class: "title" }, d.title), el("div", { class: "meta" }, `${d.source} · ${meta.join(" · ")}`)),
    remove,
  );
}

async function loadDocuments(more) {
  const params = new URLSearchParams({ limit: "50" });
  if (more && kbCursor) params.set("cursor", kbCursor);
  try {
    const page = await api("GET", `${KB}/documents?${params}`);
    const items = page.items.map(documentItem);
    if (more) $("kb-documents").append(...items);
    else $("kb-documents").replaceChildren(...items);
    kbCursor = page.next_cursor;
    $("kb-more").hidden = !kbCursor;
    $("kb-list-note").textContent = $("kb-documents").children.length ? "" : "no documents yet";
  } catch (error) {
    $("kb-list-note").textContent = error.message;
  }
}

$("kb-more").addEventListener("click", () => loadDocuments(true));

async function deleteDocument(d, button) {
  if (button.dataset.armed !== "yes") { // a second click deletes: no dialog to dismiss
    button.dataset.armed = "yes";
    button.textContent = "Really delete?";
    return;
  }
  button.disabled = true;
  let outcome;
  try {
    await api("DELETE", `${KB}/documents/${encodeURIComponent(d.id)}`);
    outcome = `deleted ${d.title}`;
  } catch (error) {
    outcome = error.message;
  }
  await afterChange();
  $("kb-list-note").textContent = outcome;
}

async function afterChange() {
  await loadDocuments(false);
  if (kbLastQuery) await runSearch(kbLastQuery);
}

// -- adding a document ----------------------------------------------------------------------------

async function upload(form) {
  // `api` sends JSON; a file goes as multipart, with the sign-in's CSRF token all the same.
  const response = await fetch(`${KB}/documents`, {
    method: "POST", body: form, credentials: "same-origin",
    headers: { "Accept": "application/json", "X-CSRF-Token": csrf },
  });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (response.status === 401 && me) signInEnded(new ApiError(response.status, data).message);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

$("kb-add").addEventListener("submit", async (event) => {
  event.preventDefault();
  const file = $("kb-file").files[0];
  const title = $("kb-title").value.trim();
  const tags = $("kb-tags").value.split(",").map((t) => t.trim()).filter(Boolean);
  const text = $("kb-text").value;
  const note = $("kb-add-note");
  let added;
  note.textContent = "adding…";
  try {
    if (file) {
      const form = new FormData();
      form.append("file", file, file.name);
      if (title) form.append("title", title);
      if (tags.length) form.append("tags", tags.join(","));
      added = await upload(form);
    } else if (text.trim()) {
      if (!title) throw new Error("pasted text needs a title");
      added = await api("POST", `${KB}/documents`, { title, content: text, format: "markdown", tags });
    } else {
      throw new Error("choose a file or paste Markdown");
    }
  } catch (error) {
    note.textContent = error.message;
    return;
  }
  const what = { added: "added", updated: `updated to version ${added.version}`, unchanged: "unchanged" };
  note.textContent = `${added.title}: ${what[added.action]} · ${passageCount(added.chunk_count)}`;
  $("kb-add").reset();
  await afterChange();
});
