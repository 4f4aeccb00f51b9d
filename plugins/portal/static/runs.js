// Runs: this principal's recent runs (GET /runs) with status, limits used and proof.

import { get } from "./api.js";
import { errorText, formatTime, h } from "./dom.js";
import { notice } from "./chatstate.js";

export async function renderRuns(main) {
  main.replaceChildren(h("h1", { text: "Runs" }), h("p", { class: "loading", text: "Loading…" }));
  let runs;
  try {
    ({ runs } = await get("/runs?limit=50"));
  } catch (error) {
    main.replaceChildren(h("h1", { text: "Runs" }), h("p", { class: "notice", role: "alert", text: errorText(error) }));
    return;
  }
  const rows = runs.map((run) => {
    const { kind, text } = notice({ status: run.status, verification: run.verification, reason: run.incomplete_reason, error: run.error });
    return h("tr", { dataset: { runId: run.run_id } },
      h("td", {}, h("code", { text: run.run_id.slice(0, 12) }), run.attempt > 1 ? ` (attempt ${run.attempt})` : ""),
      h("td", { text: run.agent_id }),
      h("td", {}, h("a", { href: `#/chat?session=${encodeURIComponent(run.session_id)}`, text: run.session_id.slice(0, 12) })),
      h("td", {}, h("span", { class: `notice ${kind}`, text })),
      h("td", { text: run.turns ?? "" }),
      h("td", { text: run.tokens ?? "" }),
      h("td", {}, run.proof ? [String(run.proof.receipts), " · ", h("code", { text: run.proof.sha256.slice(0, 12) })] : "—"),
      h("td", { text: formatTime(run.started_at) }));
  });
  const interrupted = runs.filter((r) => r.status === "interrupted");
  main.replaceChildren(...[
    h("h1", { text: "Runs" }),
    h("p", { class: "lead", text: "Your recent runs, newest first. Open a session to see its conversation." }),
    runs.length
      ? h("div", { class: "scroll" }, h("table", { class: "table runs" },
        h("thead", {}, h("tr", {}, ["run", "agent", "session", "status", "turns", "tokens", "proof (receipts · sha256)", "started"]
          .map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, rows)))
      : h("p", { class: "note", text: "No runs yet." }),
    interrupted.length
      ? h("section", { class: "card", "aria-labelledby": "interrupted-title" },
        h("h2", { id: "interrupted-title", text: "Interrupted runs" }),
        h("p", { class: "note", text: "A run whose process stopped. A workflow step that was in progress may already have " +
          "acted: reconcile it on the server before retrying the same run id." }),
        h("ul", {}, interrupted.map((r) => h("li", {}, h("code", { text: `soulacy runs reconcile ${r.run_id} --step STEP --completed|--failed` })))))
      : null].filter(Boolean));
}
