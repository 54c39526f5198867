// Switchyard call inspector: the little the pages need beyond HTML.
// - The call inspector follows its call over Server-Sent Events and replaces its live regions
//   with the server-rendered HTML each event carries.
// - The Approvals page follows the waiting questions over Server-Sent Events: new ones are
//   added, answered ones removed; cards already shown are left alone (a reason being typed
//   stays).
// - The Run tool form shows the editor the chosen mode uses.
"use strict";

function followCall(live) {
  const status = document.getElementById("call-status");
  const output = document.getElementById("call-output");
  const indicator = document.querySelector("[data-live-indicator]");
  const badges = document.querySelectorAll("[data-call-state]");
  const source = new EventSource(live.dataset.callEvents);
  indicator.hidden = false;
  source.addEventListener("call", (event) => {
    const view = JSON.parse(event.data);
    status.innerHTML = view.status_html;
    output.innerHTML = view.output_html;
    badges.forEach((badge) => {
      badge.textContent = view.state_label;
      badge.className = "badge " + view.tone;
    });
    live.dataset.state = view.state;
    if (view.settled) {
      source.close();
      live.dataset.settled = "true";
      indicator.hidden = true;
    }
  });
  // The browser reconnects by itself after a dropped stream; say so meanwhile.
  source.addEventListener("error", () => {
    indicator.textContent = source.readyState === EventSource.CLOSED ? "updates stopped: reload the page" : "reconnecting…";
  });
  source.addEventListener("open", () => {
    indicator.textContent = "live";
  });
}

function followApprovals(list) {
  const empty = document.getElementById("approvals-empty");
  const indicator = document.querySelector("[data-live-indicator]");
  const source = new EventSource(list.dataset.approvalEvents);
  indicator.hidden = false;
  source.addEventListener("approvals", (event) => {
    const view = JSON.parse(event.data);
    const wanted = new Set(view.items.map((item) => item.id));
    list.querySelectorAll("[data-approval]").forEach((card) => {
      if (!wanted.has(card.dataset.approval)) card.remove();
    });
    // Cards in the server's order: each new one goes after the card before it.
    let before = null;
    view.items.forEach((item) => {
      let card = list.querySelector(`[data-approval="${CSS.escape(item.id)}"]`);
      if (!card) {
        const holder = document.createElement("template");
        holder.innerHTML = item.html;
        card = holder.content.firstElementChild;
        if (before) before.after(card);
        else list.prepend(card);
      }
      before = card;
    });
    empty.hidden = view.items.length > 0;
    list.dataset.live = "true";
  });
  source.addEventListener("error", () => {
    indicator.textContent = source.readyState === EventSource.CLOSED ? "updates stopped: reload the page" : "reconnecting…";
  });
  source.addEventListener("open", () => {
    indicator.textContent = "live";
  });
}

function runForm(form) {
  const fields = form.querySelector("#form-fields");
  const raw = form.querySelector("#raw-json");
  const sync = () => {
    const chosen = form.querySelector("input[name=mode]:checked");
    const useRaw = !fields || (chosen && chosen.value === "raw");
    if (fields) {
      // A disabled fieldset is neither validated nor submitted.
      fields.disabled = useRaw;
      fields.hidden = useRaw;
    }
    raw.hidden = !useRaw;
  };
  form.addEventListener("change", (event) => {
    if (event.target.name === "mode") sync();
  });
  const submit = form.querySelector("button[type=submit]");
  form.addEventListener("submit", () => {
    submit.disabled = true;
  });
  // A page restored by Back must be usable again.
  window.addEventListener("pageshow", () => {
    submit.disabled = false;
  });
  sync();
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.querySelector("[data-call-events]");
  if (live && live.dataset.settled !== "true") followCall(live);
  const approvals = document.querySelector("[data-approval-events]");
  if (approvals) followApprovals(approvals);
  const form = document.querySelector("form[data-run-form]");
  if (form) runForm(form);
});
